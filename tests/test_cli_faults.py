"""Faults end with one line and a clean state: interrupts at any point, unusable output
folders (checked before any work), two runs into one folder."""

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, default_sigint


def _start(*args):
    return subprocess.Popen([sys.executable, "-m", "workbench", *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            preexec_fn=default_sigint)


@pytest.mark.parametrize("after_s, signum", [(0.5, signal.SIGINT), (2.5, signal.SIGINT),
                                              (5.0, signal.SIGTERM), (8.0, signal.SIGINT)])
def test_an_interrupt_stops_the_compile_at_once_and_leaves_nothing_half_written(tmp_path, after_s, signum):
    out = tmp_path / "out"
    proc = _start("compile", "zoo:squeezenet", "--out", str(out), "--runs", "5000")  # a long time stage
    time.sleep(after_s)
    sent = time.perf_counter()
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err
    assert time.perf_counter() - sent < 3
    assert err.strip().splitlines()[-1] == "workbench: interrupted"
    assert "Traceback" not in err
    left = sorted(p.name for p in out.iterdir()) if out.exists() else []
    assert left in ([], [".workbench.lock"]), left  # no report, no half-written temp file


@pytest.mark.parametrize("make_out", [lambda tmp: tmp / "a_file", lambda tmp: tmp / "a_file" / "sub",
                                      lambda tmp: "/proc/blockwise-out"])
def test_an_unusable_out_fails_before_any_work(cli, tmp_path, make_out):
    (tmp_path / "a_file").write_text("x")
    start = time.perf_counter()
    r = cli("compile", "zoo:squeezenet", "--out", str(make_out(tmp_path)))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "--out" in r.stderr
    assert time.perf_counter() - start < 20  # the model is only loaded, never compiled


def test_a_second_run_into_a_busy_folder_fails_clearly(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    with open(out / ".workbench.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        r = cli("compile", "fire_module", "--out", str(out))
    assert r.returncode == 2 and "another workbench run is writing" in r.stderr


def test_a_run_replaces_every_output_of_the_previous_one(cli, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    for name in ("report.json", "timing.svg", "timing.png", "model.so"):
        (out / name).write_text("from an earlier run")
    r = cli("compile", "fire_module", "--target", "cuda", "--no-export", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == [".workbench.lock", "report.json"]
    assert "earlier run" not in (out / "report.json").read_text()


@pytest.mark.parametrize("args, guess", [(("complie", "fire_module"), "did you mean 'compile'?"),
                                         (("complie",), "did you mean 'compile'?"), (("tune", "--help"), "")])
def test_a_mistyped_command_is_one_line_not_a_tui_on_a_model_named_after_it(cli, args, guess):
    r = cli(*args, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and f"'{args[0]}' is neither a command nor a model" in r.stderr
    assert guess in r.stderr


def test_inputs_that_are_not_there_fail_in_one_line_before_any_work(cli, tmp_path):
    r = cli("compile", "fire_module", "--inputs", str(tmp_path / "nope.npz"), "--out", str(tmp_path / "out"))
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"workbench: error: --inputs {tmp_path / 'nope.npz'}: no such file or folder"]
    assert not (tmp_path / "out").exists()
