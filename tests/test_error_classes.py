"""Errors in classes: bad input exits 2; an internal failure (a stage failing inside TVM or
our code) exits 1 naming the stage, cut at a word boundary, with the --debug hint."""

import pytest

import engine.pipeline as pipeline
from engine.errors import InternalError, one_line
from engine.events import CompileOptions, Stage
from engine.session import Session
from workbench import cli


def test_one_line_takes_the_message_and_never_cuts_a_word():
    err = RuntimeError("Traceback (most recent call last):\n  File \"x.py\", line 1\n"
                       "Mismatched type on argument #2: Expected Array<relax.TensorType> but got "
                       "Array[index 0: ir.TupleType, index 1: ir.TupleType]")
    text = one_line(err, 80)
    assert text.startswith("Mismatched type") and text.endswith(" …")
    assert text[:-2] in str(err) and len(text) <= 82
    assert "ir.TupleTyp " not in text and not text[:-2].endswith("TupleTyp")


@pytest.fixture
def failing_build(monkeypatch):
    def boom(ctx):
        raise RuntimeError("TVMError: something inside the build\n  at tvm::codegen")

    funcs = [(s, boom if s is Stage.BUILD else f) for s, f in pipeline._STAGE_FUNCS]
    monkeypatch.setattr(pipeline, "_STAGE_FUNCS", funcs)


def test_a_stage_failing_inside_is_an_internal_error(failing_build):
    with pytest.raises(InternalError, match=r"^stage 'build' failed: TVMError: something inside the build$") as err:
        Session("fire_module").compile(CompileOptions(timing=False))
    assert err.value.exit_code == 1


def test_the_cli_prints_one_line_with_the_hint_and_exits_1(failing_build, capsys, tmp_path):
    code = cli.main(["compile", "fire_module", "--out", str(tmp_path / "o")])
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("[")]
    assert code == 1 and len(err) == 1  # besides the stage progress lines
    assert err[0] == ("workbench: error: stage 'build' failed: TVMError: something inside the build "
                      "(rerun with --debug for the traceback)")
