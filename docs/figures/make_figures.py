"""Regenerate every picture the docs use, from the project's own code on the bundled samples.

    .venv/bin/python docs/figures/make_figures.py            # all figures (about half a minute)
    .venv/bin/python docs/figures/make_figures.py --no-tui   # skip the TUI screenshots
    .venv/bin/python docs/figures/make_figures.py --out DIR  # elsewhere (the docs test does)

Each figure comes from the same code a user runs:

- tui-*.svg: the Textual app on the real engine (fire_module, llvm), driven headless with
  Pilot and saved with Textual's own `export_screenshot` (tests/test_tui_engine.py does the
  same); tui-timing.svg holds the measured times of the compile it ran;
- opgraph-inception_block.svg: `workbench inspect inception_block --svg`;
- blockmap-*.svg: `workbench blockdeps fire_module --target cuda --edge P:C --svg` (a sampled
  block graph of one edge);
- fused-grid-inception_block-cuda.svg: d0 of inception_block's cuda plan:
  each member's own grid (engine.parallel.codegen.gpu.gpu_member) and the launch the cuda
  code generator makes of them (its `launch_shape`: blocks per member in the fused
  blockIdx.x range, threads, idle share, shared memory), drawn with matplotlib;
- timing-inception_block.svg: what `workbench compile inception_block --approve all` writes
  (timing.svg: every kernel before and after the plan, measured in the same run).

Deterministic where the inputs are: graph and block figures and the plan-derived grid are
the same on every run on a machine with the same core count; the TUI timing screen and the
timing chart hold measured times, which differ from run to run. SVG metadata dates are fixed
(SOURCE_DATE_EPOCH) and matplotlib's ids salted, so an unchanged figure diffs as unchanged.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT))

TUI_SIZE = (160, 45)

# name -> what the docs say it is (tests/test_docs.py checks each exists and is referenced)
FIGURES = {
    "tui-graph.svg": "TUI, Graph tab (fire_module, llvm)",
    "tui-blocks.svg": "TUI, Blocks tab: the block map of one kernel edge",
    "tui-fusion.svg": "TUI, Fusion tab: the plan's decisions with their evidence",
    "tui-timing.svg": "TUI, Timing tab after compiling before (c) and with (C) the plan",
    "tui-help.svg": "TUI, the ? help screen",
    "opgraph-inception_block.svg": "workbench inspect inception_block --svg",
    "blockmap-fire_module-cuda-one-to-one.svg": "workbench blockdeps fire_module --target cuda --edge 0:1 --svg",
    "blockmap-fire_module-cuda-one-to-few.svg": "workbench blockdeps fire_module --target cuda --edge 0:2 --svg",
    "fused-grid-inception_block-cuda.svg": "inception_block's d0 on cuda: members alone and the fused launch",
    "timing-inception_block.svg": "workbench compile inception_block --approve all: timing.svg",
}


def workbench(*argv: str) -> str:
    """Run one `workbench` command in this process; its stdout. A failure stops the script."""
    from workbench.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code != 0:
        raise SystemExit(f"workbench {' '.join(argv)} failed with exit code {code}")
    return out.getvalue()


def salt_matplotlib() -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "blockwise-docs"


def make_opgraph(out: Path) -> None:
    workbench("inspect", "inception_block", "--svg", str(out / "opgraph-inception_block.svg"))


def make_block_maps(out: Path) -> None:
    # cuda: dlight's schedules (stable); the llvm schedules are this project's own and change
    for edge, cls in (("0:1", "one-to-one"), ("0:2", "one-to-few")):
        workbench("blockdeps", "fire_module", "--target", "cuda", "--edge", edge, "--blocks", "8",
                  "--svg", str(out / f"blockmap-fire_module-cuda-{cls}.svg"))


def fused_launch(model: str, decision: str):
    """The members' own grids and the fused launch the cuda code generator makes for one
    decision of the model's plan: (decision, [(blocks, threads) per member], LaunchShape)."""
    from engine.parallel.codegen.gpu import gpu_member
    from engine.session import Session
    from engine.targets import get_target

    session = Session(model)
    mod = session.scheduled("cuda").module
    d = session.propose("cuda").plan.decision(decision)
    names = [m.func for m in d.members]
    alone = []
    for name in names:
        stage = gpu_member(mod[name], name).stages[-1]
        alone.append((stage.blocks, stage.threads))
    spec = get_target("cuda")
    shape = spec.fusion.launch_shape([mod[n] for n in names], names, None, spec.target(None))
    return d, alone, shape


def make_fused_grid(out: Path) -> None:
    """inception_block's d0 on cuda: four launches (each member's own grid and threads) and
    the one fused launch whose blockIdx.x range is split among them (a member whose threads
    work alone is regrouped into blocks of the fused thread count)."""
    import matplotlib.pyplot as plt

    d, alone, shape = fused_launch("inception_block", "d0")
    colors = ["#3a7bd5", "#ef6c00", "#2e7d32", "#8e24aa", "#c62828", "#00838f"]
    total = max(shape.blocks, sum(b for b, _ in alone))
    fig, ax = plt.subplots(figsize=(11, 3.4))
    start = 0
    for i, (m, (blocks, threads)) in enumerate(zip(d.members, alone)):  # before: one launch each
        ax.broken_barh([(start, blocks)], (1.35, 0.8), facecolors=colors[i % len(colors)], edgecolor="white")
        ax.text(start + blocks / 2, 1.75, f"k{m.kernel}\n{blocks} x {threads}",
                ha="center", va="center", fontsize=6.5, color="white")
        start += blocks + total * 0.01  # a gap: separate launches
    start = 0
    for i, (m, blocks) in enumerate(zip(d.members, shape.member_blocks)):  # after: one launch
        ax.broken_barh([(start, blocks)], (0.1, 0.8), facecolors=colors[i % len(colors)], edgecolor="white")
        ax.text(start + blocks / 2, 0.5, f"k{m.kernel}\n{start}-{start + blocks - 1}",
                ha="center", va="center", fontsize=6.5, color="white")
        start += blocks
    ax.set_xlim(0, total * 1.04)
    ax.set_ylim(0, 2.3)
    ax.set_yticks([0.5, 1.75], [f"fused: 1 launch\n{shape.blocks} x {shape.threads_per_block} threads",
                                f"members alone:\n{len(alone)} launches"], fontsize=8)
    ax.set_xlabel("thread blocks (blocks x threads per block; fused: the blockIdx.x range of each member)")
    members = ", ".join(f"k{m.kernel} {m.labels[0]}" for m in d.members)
    fig.suptitle(f"inception_block on cuda, {d.id} ({d.kind.value}): {members}", fontsize=9, x=0.01, ha="left")
    ax.set_title(f"each fused block runs one member (a thread-invariant branch on blockIdx.x); a member whose "
                 f"threads work alone (the max pool) is regrouped into blocks of {shape.threads_per_block} threads; "
                 f"idle thread slots {shape.idle_threads:.0%}, ~{shape.shared_bytes / 1024:.1f} KiB shared per block "
                 f"(the largest member's, estimated from TIR)", fontsize=6.5, loc="left", color="#444444", wrap=True)
    fig.tight_layout()
    fig.savefig(out / "fused-grid-inception_block-cuda.svg", format="svg")
    plt.close(fig)


def make_timing_chart(out: Path, work: Path) -> None:
    run_dir = work / "inception_block-llvm"
    workbench("compile", "inception_block", "--approve", "all", "--no-export", "--runs", "20",
              "--out", str(run_dir))
    shutil.copyfile(run_dir / "timing.svg", out / "timing-inception_block.svg")


async def settle(pilot, app) -> None:
    """Let the app's workers finish and their messages land (as tests/test_tui.py does)."""
    from textual.worker import WorkerCancelled

    for _ in range(4):
        for worker in [w for w in app.workers if not w.is_finished]:
            try:
                await worker.wait()
            except WorkerCancelled:  # a superseded layout worker
                pass
        await pilot.pause()


async def _drive_tui(out: Path, work: Path) -> None:
    from workbench.tui.app import WorkbenchApp
    from workbench.tui.engine_adapter import EngineAnalyses

    # run in `work` with the plan at its default relative path: no temp path on screen
    app = WorkbenchApp(str(ROOT / "sample_models" / "fire_module.onnx"),
                       analyses=EngineAnalyses("out/fire_module-llvm/plan.json"), out_dir=Path("export"), runs=10)
    app.animation_level = "none"

    async def shot(name: str) -> None:
        app.clear_notifications()
        await pilot.pause()
        (out / name).write_text(app.export_screenshot(title=f"blockwise: {name[4:-4]}"))

    async with app.run_test(size=TUI_SIZE) as pilot:
        await settle(pilot, app)
        await pilot.press("right_square_bracket")  # select the first operator: its properties
        await shot("tui-graph.svg")
        await pilot.press("question_mark")
        await settle(pilot, app)
        await shot("tui-help.svg")
        await pilot.press("escape")
        await pilot.press("2")
        await settle(pilot, app)
        await shot("tui-blocks.svg")
        await pilot.press("3")
        await settle(pilot, app)
        await shot("tui-fusion.svg")
        await pilot.press("A")  # approve every decision, then compile without and with the plan
        await pilot.press("c")
        await settle(pilot, app)
        await pilot.press("C")
        await settle(pilot, app)
        await pilot.press("4")
        await settle(pilot, app)
        await shot("tui-timing.svg")


def make_tui(out: Path, work: Path) -> None:
    here = Path.cwd()
    os.chdir(work)
    try:
        asyncio.run(_drive_tui(out.resolve(), work))
    finally:
        os.chdir(here)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=HERE, help="folder for the figures (default: docs/figures)")
    parser.add_argument("--no-tui", action="store_true", help="skip the TUI screenshots")
    args = parser.parse_args(argv)
    args.out = args.out.resolve()  # before the chdir: relative to where it was called
    os.chdir(ROOT)
    os.environ.setdefault("SOURCE_DATE_EPOCH", "0")  # matplotlib: no creation date in the SVG
    salt_matplotlib()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="blockwise-figures-") as tmp:
        work = Path(tmp)
        steps = [make_opgraph, make_block_maps, make_fused_grid, lambda o: make_timing_chart(o, work)]
        if not args.no_tui:
            steps.append(lambda o: make_tui(o, work))
        for step in steps:
            step(args.out)
    for name in FIGURES:
        path = args.out / name
        if path.exists():
            print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
