"""bench/compare.py's summaries and raw-data writer on synthetic rows (no compile, no TVM run)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
sys.path.insert(0, str(BENCH))

import compare  # noqa: E402
from compare import AUTO, BASE, METASCHEDULE, ORT, TUNED, UNSCHEDULED, Row  # noqa: E402


def _row(model: str, **latency: float) -> Row:
    """A row whose spreads are +-2% of each median."""
    names = {"auto": AUTO, "base": BASE, "ort": ORT, "ms": METASCHEDULE, "tuned": TUNED,
             "unscheduled": UNSCHEDULED, "par": "+parallel-fusion"}
    row = Row(model)
    for key, v in latency.items():
        row.latency_ms[names[key]] = v
        row.spread_ms[names[key]] = (v * 0.98, v * 1.02)
    return row


@pytest.fixture
def rows() -> list[Row]:
    return [_row("a", ort=2.0, base=1.0, auto=0.9, ms=4.0, tuned=1.0, unscheduled=100.0),
            _row("b", ort=1.0, base=2.0, auto=2.5, unscheduled=400.0),
            _row("c", ort=1.0, base=1.0, auto=1.01, par=0.5)]


def test_unscheduled_peer_is_in_no_headline_geomean(rows):
    summary = compare.summarise(rows)
    for by_peer in summary["headline"].values():
        assert UNSCHEDULED not in by_peer
    assert summary["curiosity"]["ratio"] == f"{BASE} / {UNSCHEDULED}"
    assert summary["curiosity"]["geomean"] == pytest.approx((1 / 100 * 2 / 400) ** 0.5)
    out = io.StringIO()
    compare.print_table(rows, summary, out)
    text = out.getvalue()
    header = text.splitlines()[0]
    assert UNSCHEDULED not in header and BASE in header and ORT in header
    note = text.index(f"note: {UNSCHEDULED}")
    assert "no schedule" in text[note:] and "in no geomean" in text[note:]
    assert text.index("geometric mean") < note  # the curiosity comes after the headline


def test_headline_geomeans_against_onnxruntime_and_blockwise(rows):
    headline = compare.summarise(rows)["headline"]
    assert headline[BASE][ORT] == {"geomean": pytest.approx((0.5 * 2.0 * 1.0) ** (1 / 3)), "models": 3}
    assert set(headline["+parallel-fusion"]) == {ORT, BASE}
    assert headline["+parallel-fusion"][BASE] == {"geomean": pytest.approx(0.5), "models": 1}


def test_auto_ratio_is_against_blockwise(rows):
    auto = compare.summarise(rows)["auto"]
    assert auto["ratio"] == f"{AUTO} / {BASE}"
    assert auto["per_model"]["a"]["ratio"] == pytest.approx(0.9)
    assert auto["per_model"]["b"]["ratio"] == pytest.approx(1.25)
    assert auto["geomean"] == pytest.approx((0.9 * 1.25 * 1.01) ** (1 / 3))
    # b is slower beyond its spread; c's 1% is inside the +-2% spreads: noise
    assert auto["slower_beyond_noise"] == ["b"]
    assert compare.summarise(rows)["headline"][AUTO][BASE]["geomean"] == pytest.approx(auto["geomean"])
    out = io.StringIO()
    compare.print_table(rows, compare.summarise(rows), out)
    lines = [ln.split() for ln in out.getvalue().splitlines()]
    assert ["b", "1.250x", "SLOWER", "beyond", "noise"] in lines and ["c", "1.010x"] in lines


def test_tuned_pair_ratio_is_ours_over_metaschedule(rows):
    rows[0].tuning[METASCHEDULE] = {"trials": 16, "tasks": 4, "tasks_scheduled": 4, "records": 16,
                                    "valid_records": 16}
    tuned = compare.summarise(rows)["tuned"]
    assert tuned["per_model"] == {"a": pytest.approx(0.25)} and tuned["models"] == 1
    out = io.StringIO()
    compare.print_table(rows, compare.summarise(rows), out)
    line = [ln for ln in out.getvalue().splitlines() if ln.startswith("a ") and "0.250x" in ln]
    assert line and "4/4" in line[0]


def test_json_writer_records_date_cpu_and_versions(rows, tmp_path):
    also = tmp_path / "elsewhere" / "c.json"
    paths = compare.write_results(rows, compare.summarise(rows), {"runs": 5}, also=str(also),
                                  results=tmp_path / "results", now=1796300000.0)
    assert paths[0].parent == tmp_path / "results" and paths[0].name.startswith("compare-2026")
    assert paths[1] == also
    data = json.loads(paths[0].read_text())
    assert data == json.loads(also.read_text())
    machine = data["machine"]
    assert machine["date"].startswith("2026-") and machine["cpu"] and machine["cores"] >= 1
    assert machine["tvm"].startswith("0.27")
    assert data["models"][0]["latency_ms"][UNSCHEDULED] == 100.0
    assert data["summary"]["auto"]["slower_beyond_noise"] == ["b"]


def test_cpu_model_reads_the_model_name(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nmodel name\t: Some CPU @ 2.0GHz\n")
    assert compare.write_raw.__module__ == "run_record"
    from run_record import cpu_model

    assert cpu_model(str(info)) == "Some CPU @ 2.0GHz"


def test_onnxruntime_and_our_builds_are_timed_in_turns(monkeypatch):
    """Each turn: a fresh onnxruntime session timed alone and closed, then our builds; every
    configuration gets samples from every turn (a slow period hits both sides of a ratio)."""
    import engine.runtime.measure as measure

    log: list[str] = []

    class Session:
        def __init__(self):
            log.append("open")

        def run(self, _outputs, _inputs):
            log.append("ort")

        def __del__(self):
            log.append("close")

    monkeypatch.setattr(measure, "onnxruntime_session", lambda *_a, **_k: Session())
    monkeypatch.setattr(compare.time, "sleep", lambda _s: None)
    monkeypatch.setattr(compare, "_calls_per_sample", lambda _fn: 1)
    model = type("M", (), {"proto": type("P", (), {"SerializeToString": lambda self: b""})()})()
    samples = compare._alternating(model, {}, {"blockwise": lambda: log.append("ours")}, runs=6)
    assert set(samples) == {ORT, "blockwise"}
    assert len(samples[ORT]) == len(samples["blockwise"]) >= 6
    turns = "".join({"open": "(", "close": ")", "ort": "", "ours": "b"}[e] for e in log)
    assert turns.replace("b", "") == "()" * compare.TURNS  # the session is gone before ours run
    assert turns.count(")b") == compare.TURNS  # our builds run after each onnxruntime turn


def test_an_arch_build_is_fused_by_that_arch_plan():
    """With `--arch haswell` the variants' plan is proposed for the AVX2 kernels they build,
    not the host's: the two may differ (mobilenet_block's AVX2 build once got pairs its
    kernels do not have, and applied none of them)."""
    from engine.session import Session

    session = Session("mobilenet_block")
    asked = []
    propose = session.propose
    session.propose = lambda target="llvm", arch=None: asked.append(arch) or propose(target, arch=arch)
    built = compare._variants(session, 0, arch="haswell")["+block-fusion"]().plan
    assert asked and set(asked) == {"haswell"}
    want = propose("llvm", arch="haswell").plan
    assert sorted(d.title() for d in built.approved()) == sorted(
        d.title() for d in want.decisions if d.kind.vertical and d.status.value != "rejected")
    assert built.fingerprint == want.fingerprint


def test_peer_isa_avx2_needs_our_code_for_that_isa(capsys):
    assert compare.main(["--peer-isa", "avx2", "--models", "fire_module"]) == 2
    assert "add --arch" in capsys.readouterr().err


def _can_hide_avx512() -> bool:
    import shutil

    from numpy._core._multiarray_umath import __cpu_features__ as features

    cpuinfo = Path("/proc/cpuinfo")
    return (features.get("AVX512F") and cpuinfo.exists() and "cpuid_fault" in cpuinfo.read_text()
            and shutil.which("cc") is not None)


@pytest.mark.skipif(not _can_hide_avx512(), reason="needs an AVX-512 Linux machine with CPUID faulting and cc")
def test_the_shim_hides_avx512_from_cpuid():
    """Under bench/hide_avx512.c numpy's (and onnxruntime's) run-time dispatch sees AVX2 and
    no AVX-512; the process otherwise runs as usual."""
    import os
    import subprocess

    import peer_isa

    probe = ("from numpy._core._multiarray_umath import __cpu_features__ as f; "
             "import numpy as np; assert np.dot(np.ones(64), np.ones(64)) == 64; print(f['AVX512F'], f['AVX2'])")
    env = dict(os.environ, LD_PRELOAD=str(peer_isa._shim()))
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "True"]


def test_a_native_peer_isa_leaves_the_process_alone(monkeypatch):
    import peer_isa

    monkeypatch.setattr(peer_isa.os, "execve", lambda *a: pytest.fail("re-executed"))
    peer_isa.ensure("native", ["compare.py"])


def test_no_cpuid_faulting_is_one_line(monkeypatch, tmp_path):
    import peer_isa

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("flags\t\t: fpu avx2 avx512f\n")
    monkeypatch.setattr(peer_isa, "CPUINFO", cpuinfo)
    monkeypatch.setattr(peer_isa, "_avx512_visible", lambda: True)
    monkeypatch.delenv(peer_isa.MARK, raising=False)
    monkeypatch.setattr(peer_isa.os, "execve", lambda *a: pytest.fail("re-executed"))
    with pytest.raises(peer_isa.PeerIsaError, match="no CPUID faulting"):
        peer_isa.ensure("avx2", ["compare.py"])
