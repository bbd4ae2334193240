"""`workbench blockdeps` as a user runs it."""

import json

from tests.conftest import SAMPLES


def _fails(res, message: str):
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert message in lines[0], lines[0]


def test_text_output(cli):
    res = cli("blockdeps", "fire_module", "--target", "cuda")
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "k0 squeeze1x1/conv -> k1 expand1x1/conv  grids 25 -> 25  one-to-one  fan-in 1.00/1  exact" in out
    assert "k0 squeeze1x1/conv -> k2 expand3x3/conv" in out and "one-to-few" in out
    assert "classes    independent 0, one-to-one 1, one-to-few 1, partial 0, all-to-all 2" in out
    assert "simplify" in out and "parallel" in out and "independent kernel pairs" in out


def test_json_output(cli):
    res = cli("blockdeps", str(SAMPLES / "fire_module.onnx"), "--target", "llvm", "--method", "exact", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["target"] == "llvm" and data["method"] == "exact"
    assert len(data["edges"]) == 4 and all(e["method"] == "exact" for e in data["edges"])
    # squeeze -> expand1x1 (pixel-vectorised) all-to-all, expand1x1 -> concat one-to-one
    assert [e["class"] for e in data["edges"]][:3:2] == ["all-to-all", "one-to-one"]
    assert data["kernels"][0]["grid"]["axis"] == "parallel loop"
    assert data["simplification"]["kernel_edges"] == 4
    assert [1, 2] in data["parallelism"]["independent_pairs"]


def test_edge_by_label_and_svg(cli, tmp_path):
    out = tmp_path / "edge.svg"
    res = cli("blockdeps", "fire_module", "--target", "cuda", "--edge", "squeeze1x1:expand3x3",
              "--svg", str(out))
    assert res.returncode == 0, res.stderr
    first = res.stdout.splitlines()[0]
    assert first.startswith("k0 squeeze1x1/conv -> k2 expand3x3/conv") and "one-to-few" in first
    # row tiles with a one-row halo: block 0 reads tiles 0-1, inner blocks c-1..c+1
    assert "  block     0 <- [0, 1]  starts after producer block 1" in res.stdout
    assert "  block     3 <- [2, 3, 4]  starts after producer block 4" in res.stdout
    svg = out.read_text().replace("&#45;", "-")
    assert svg.startswith("<?xml") and "</svg>" in svg and "one-to-few" in svg


def test_edge_by_kernel_index_and_func_json(cli):
    res = cli("blockdeps", "fire_module", "--target", "cuda", "--edge", "k1:concatenate", "--json",
              "--method", "fast")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["producer"]["index"] == 1 and data["consumer"]["func"] == "concatenate"
    assert data["method"] == "fast" and len(data["producers_of"]) == data["consumer_grid"]["blocks"]


def test_model_svg_is_summarised_kernel_by_kernel(cli, tmp_path):
    out = tmp_path / "model.svg"
    res = cli("blockdeps", "fire_module", "--target", "cuda", "--svg", str(out))
    assert res.returncode == 0, res.stderr
    svg = out.read_text().replace("&#45;", "-")
    assert "block dependencies between kernels" in svg and "all-to-all" in svg and "fan-in" in svg
    assert "showing 6 of" not in svg  # no sampled blocks: grids of 98 blocks are one node each


def test_bad_edge(cli):
    _fails(cli("blockdeps", "fire_module", "--target", "cuda", "--edge", "nope:expand1x1"),
           "unknown kernel 'nope' in --edge 'nope:expand1x1'")
    _fails(cli("blockdeps", "fire_module", "--target", "cuda", "--edge", "expand1x1:squeeze1x1"),
           "no kernel edge from 'expand1x1'")
    _fails(cli("blockdeps", "fire_module", "--edge", "squeeze1x1"), "expected PRODUCER:CONSUMER")
