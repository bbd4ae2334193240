"""Timings of the block dependency analysis: per edge fast and exact, and whole-model totals.

    python bench/blockdeps_speed.py [MODEL] [--target cuda|llvm] [--top N]

Defaults: zoo:inception_v1 for cuda. Scheduling (Session.scheduled) is timed separately;
the analysis totals exclude it. Prints the slowest edges and the totals.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.blockdeps import Method, analyze_model  # noqa: E402
from engine.blockdeps.analysis import _Prepared  # noqa: E402
from engine.blockdeps.block_map import DEFAULT_FEW_BOUND, build_map  # noqa: E402
from engine.blockdeps.model_graph import block_dependency_graph  # noqa: E402
from engine.session import Session  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default="zoo:inception_v1")
    ap.add_argument("--target", default="cuda", choices=["cuda", "llvm"])
    ap.add_argument("--top", type=int, default=15, help="slowest edges to list")
    args = ap.parse_args(argv)

    session = Session(args.model)
    t = time.perf_counter()
    scheduled = session.scheduled(args.target)
    print(f"schedule ({args.model}, {args.target}): {time.perf_counter() - t:.1f} s, "
          f"{len(scheduled.kernels)} kernels")

    t = time.perf_counter()
    prep = _Prepared(scheduled)
    t_prep = time.perf_counter() - t
    rows = []
    owners: dict = {}
    for edge in prep.edges:
        t0 = time.perf_counter()
        fast = build_map(edge, Method.FAST, DEFAULT_FEW_BOUND, {})
        t1 = time.perf_counter()
        exact = build_map(edge, Method.EXACT, DEFAULT_FEW_BOUND, owners)
        t2 = time.perf_counter()
        rows.append((t1 - t0, t2 - t1, edge, fast, exact))
    print(f"prepare (walk {len(prep.accesses)} PrimFuncs, {len(prep.edges)} edges): {t_prep * 1000:.0f} ms")
    print(f"{'edge':<58} {'grids':>11} {'fast ms':>8} {'exact ms':>9}  class fast -> exact")
    for tf, te, edge, fast, exact in sorted(rows, key=lambda r: -r[1])[:args.top]:
        name = f"{edge.producer.describe()} {edge.producer.func[:20]} -> {edge.consumer.describe()}"
        grids = f"{fast.producer_grid.blocks}x{fast.consumer_grid.blocks}"
        print(f"{name:<58} {grids:>11} {tf * 1000:8.1f} {te * 1000:9.1f}  "
              f"{fast.edge_class.value} -> {exact.edge_class.value}")
    fast_total = sum(r[0] for r in rows)
    exact_total = sum(r[1] for r in rows)
    print(f"fast:  total {fast_total:.2f} s, max {max(r[0] for r in rows) * 1000:.1f} ms/edge, "
          f"mean {fast_total / len(rows) * 1000:.1f} ms/edge")
    print(f"exact: total {exact_total:.2f} s (owner maps shared per producer), "
          f"max {max(r[1] for r in rows) * 1000:.0f} ms/edge")
    print(f"exact never looser than fast: {all(e.is_within(f) for _, _, _, f, e in rows)}")
    for method in (Method.FAST, Method.AUTO, Method.EXACT):
        t = time.perf_counter()
        deps = analyze_model(scheduled, method)
        dt = time.perf_counter() - t
        counts = ", ".join(f"{c.value} {n}" for c, n in deps.class_counts().items() if n)
        print(f"analyze_model({method.value}): {dt:.2f} s  [{counts}]  methods "
              f"{ {m.value: n for m, n in deps.method_counts().items()} }")
    t = time.perf_counter()
    g = block_dependency_graph(deps)
    print(f"block_dependency_graph: {time.perf_counter() - t:.2f} s, {g.number_of_nodes()} nodes, "
          f"{g.number_of_edges()} edges")
    return 0


if __name__ == "__main__":
    sys.exit(main())
