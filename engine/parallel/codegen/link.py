"""What the CPU and GPU block-level vertical code generators share: the checks that a
producer/consumer pair still matches its plan.BlockLink, the consumer's parameters with
the intermediate joined to the producer's output, and which consumer block runs k-th
after producer block b."""

from __future__ import annotations

from dataclasses import replace

import tvm_ffi
from tvm import tirx

from engine.parallel.plan import LinkPattern
from engine.parallel.tir_util import FusionUnsupported, RootParts


def check_blocks(producer_blocks: int, consumer_blocks: int, link) -> None:
    """FusionUnsupported unless the kernels' block counts are the link's."""
    if (producer_blocks, consumer_blocks) != (link.producer_blocks, link.consumer_blocks):
        raise FusionUnsupported(f"block counts {producer_blocks}/{consumer_blocks} differ from the plan's "
                                f"{link.producer_blocks}/{link.consumer_blocks}: the kernels changed")
    if consumer_blocks != producer_blocks * link.per_producer:
        raise FusionUnsupported("consumer blocks are not producer blocks x per-producer")


def join_intermediate(p: RootParts, c: RootParts, link, consumer_name: str) -> tuple[dict, RootParts]:
    """(substitution of the consumer's intermediate param by the producer's output, the
    consumer's parts without that param); FusionUnsupported when it reads a view."""
    inter = c.inputs[link.consumer_param]
    if not tvm_ffi.structural_equal(inter.ty, p.output.ty):
        raise FusionUnsupported(f"{consumer_name} reads the producer's output with another shape (a view)")
    rest = replace(c, inputs=tuple(x for i, x in enumerate(c.inputs) if i != link.consumer_param))
    return {inter.__chandle__(): p.output}, rest


def consumer_blocks(b: tirx.Var, link, producer_blocks: int, at, barrier: tirx.Stmt | None = None) -> tirx.Stmt:
    """The consumer blocks of producer block b, `at(index)` each: the k-th is b*per + k
    (contiguous) or b + k*producer_blocks (strided); several run in a serial loop over k,
    each followed by `barrier` when one is given."""
    if link.per_producer == 1:
        return at(b)
    i64 = lambda v: tirx.const(v, "int64")
    k = tirx.Var("fused_k", "int64")
    index = (b * i64(link.per_producer) + k if link.pattern is LinkPattern.CONTIGUOUS
             else b + k * i64(producer_blocks))
    body = at(index) if barrier is None else tirx.SeqStmt([at(index), barrier])
    return tirx.For(k, i64(0), i64(link.per_producer), tirx.ForKind.SERIAL, body)
