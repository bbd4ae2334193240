"""The BERT-base-like encoder sample: generated on first use (57 MB of weights, not in git),
its structure, and a compile that verifies against onnxruntime."""

import onnx
import pytest

from engine import model as model_module
from engine.events import CompileOptions
from engine.session import Session
from sample_models import build_samples

OPTIONS = CompileOptions(runs=2, timing=False)


def _tiny():
    return build_samples.make_bert_encoder(layers=1, seq=8, dim=32, heads=2, ffn=64)


def test_a_generated_sample_is_written_once_on_first_use(tmp_path, monkeypatch):
    built = []
    monkeypatch.setattr(model_module, "SAMPLE_DIR", tmp_path)
    monkeypatch.setitem(build_samples.GENERATED, "bert_encoder", lambda: built.append(1) or _tiny())
    first = model_module.resolve_path("bert_encoder")
    assert first == tmp_path / "bert_encoder.onnx" and first.is_file() and built == [1]
    assert model_module.resolve_path("bert_encoder") == first and built == [1]  # the file is reused
    assert not list(tmp_path.glob("*.tmp"))


def test_encoder_structure_has_qkv_projections_reading_one_input():
    graph = _tiny().graph
    readers = {}
    for node in graph.node:
        if node.op_type == "MatMul":
            readers.setdefault(node.input[0], []).append(node.name)
    assert sorted(readers["input"]) == [f"layer0/attention/{n}/MatMul" for n in ("key", "query", "value")]
    ops = [n.op_type for n in graph.node]
    assert ops.count("LayerNormalization") == 2 and ops.count("Erf") == 1 and ops.count("Softmax") == 1


def test_tiny_encoder_compiles_and_verifies(tmp_path):
    path = tmp_path / "bert_tiny.onnx"
    onnx.save(_tiny(), path)
    result = Session(str(path)).compile(OPTIONS)
    assert result.verification.passed
    # erf is legalized as TVM's rational approximation on llvm (vectorisable)
    assert any("fast_erf" in k.func for k in result.kernels)


@pytest.mark.slow
def test_bert_encoder_sample_verifies():
    result = Session("bert_encoder").compile(OPTIONS)
    assert result.verification.passed and len(result.kernels) <= 32
