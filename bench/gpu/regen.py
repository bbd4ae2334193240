"""Deterministic weight regeneration: ship a recipe instead of the weight bytes.

Large float weights (conv / gemm / matmul kernels) are the bulk of a model file. pack.py
replaces each such initializer by `regen_tensor(seed, name, shape, mean, std)`, compiles
THAT model with our pipeline (the TVM library embeds those very values as constants),
and ships the ONNX file without those initializers plus the recipe and a sha256 of every
regenerated tensor. run_gpu.py rebuilds them with the same function and checks the
hashes, so onnxruntime, torch eager and torch.compile run the weights TVM runs.

Only numpy and onnx are needed: this file runs on the GPU machine as it is.

Recipe: z = numpy.random.default_rng([seed, key]).standard_normal(shape, dtype=float32),
key = first 8 bytes (little-endian) of sha256(name); tensor = z * float32(std) + float32(mean).
PCG64 streams and float32 standard_normal (ziggurat) have been stable since numpy 1.17;
the hash check catches a numpy that draws differently.
"""

from __future__ import annotations

import hashlib

import numpy as np

RECIPE = ("numpy.random.default_rng([seed, int.from_bytes(sha256(name)[:8], 'little')])"
          ".standard_normal(shape, dtype=float32) * float32(std) + float32(mean)")


def _key(name: str) -> int:
    return int.from_bytes(hashlib.sha256(name.encode("utf-8")).digest()[:8], "little")


def regen_tensor(seed: int, name: str, shape, mean: float, std: float) -> np.ndarray:
    rng = np.random.default_rng([int(seed), _key(name)])
    z = rng.standard_normal(tuple(int(d) for d in shape), dtype=np.float32)
    return z * np.float32(std) + np.float32(mean)


def sha256_of(array: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def restore_initializers(proto, entries: list[dict]):
    """Add the regenerated initializers described by `entries` (from the manifest) back to
    `proto` (in place). Returns the names whose sha256 does not match (empty when exact)."""
    from onnx import numpy_helper

    bad = []
    for e in entries:
        array = regen_tensor(e["seed"], e["name"], e["shape"], e["mean"], e["std"])
        if sha256_of(array) != e["sha256"]:
            bad.append(e["name"])
        proto.graph.initializer.append(numpy_helper.from_array(array, e["name"]))
    return bad
