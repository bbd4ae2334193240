"""Propose block-level vertical fusion (BlockDepend): producer -> consumer kernel pairs
whose block map (engine.blockdeps) lets them run block by block in one launch.

A pair is proposed when every consumer block reads exactly one producer block, the
consumers of producer block b follow a regular pattern (b*r + k or b + k*P), both kernels
are one parallel loop the target's code generator can fuse, the consumer reads the
producer's output as it is (not a reshaped view), and no other dependency path joins them
(the fused call then has a legal place). Nothing here changes IR.
"""

from __future__ import annotations

import numpy as np
from tvm import relax

from engine.blockdeps import EdgeClass, Method, analyze_edges
from engine.parallel.detection import member_info
from engine.parallel.gain import busy_share, weighted_busy
from engine.parallel.kernel_graph import KernelGraph, alias_roots, call_args, is_call_tir, key, main_bindings
from engine.parallel.plan import (BlockLink, DecisionId, DecisionKind, DecisionStatus, Evidence, FusionDecision,
                                  Gain, LinkPattern, MemberRef)
from engine.parallel.tir_util import FusionUnsupported, buffer_bytes


def block_link(edge, consumer_param: int) -> BlockLink | None:
    """The regular one-to-one pattern of an EdgeBlockMap, or None."""
    if edge.edge_class is not EdgeClass.ONE_TO_ONE or edge.via_view:
        return None
    n_p, n_c = edge.producer_grid.blocks, edge.consumer_grid.blocks
    if not np.all(edge.fan_in == 1) or n_p < 1 or n_c % n_p:
        return None
    per = n_c // n_p
    owner = edge.indices  # fan-in 1 everywhere: the producer block of each consumer block
    c = np.arange(n_c)
    for pattern, expect in ((LinkPattern.CONTIGUOUS, c // per), (LinkPattern.STRIDED, c % n_p)):
        if np.array_equal(owner, expect):
            return BlockLink(edge.edge_class.value, edge.method.value, n_p, n_c, per, pattern, consumer_param)
    return None


def consumer_params(mod):
    """(producer, consumer) -> position of the producer's output among the consumer's
    arguments, None when it is passed twice; aliases (`lv = lv1`) looked through."""
    bindings = main_bindings(mod)
    roots = alias_roots(bindings)
    calls = [b for b in bindings if is_call_tir(b.value)]

    def param(producer: int, consumer: int) -> int | None:
        pvar = key(calls[producer].var)
        hits = [i for i, a in enumerate(call_args(calls[consumer].value))
                if isinstance(a, relax.Var) and roots.get(key(a), key(a)) == pvar]
        return hits[0] if len(hits) == 1 else None

    return param


def propose_vertical(scheduled, graph, kg: KernelGraph, codegen, single_stage, start: int,
                     model, target, launch, taken=frozenset()) -> list[FusionDecision]:
    """Decisions d{start}.. for every fusable one-to-one edge but the (producer, consumer)
    pairs in `taken`. `single_stage(k)`: kernel k is
    one parallel loop the code generator accepts. Each pair is fused once here (a dry run):
    a pair the code generator refuses is listed rejected, with its reason. `launch(kernels,
    link)`: the fused kernel's launch facts (engine.parallel.propose)."""
    if not codegen.fuses_vertically:
        return []

    def keep(p, c) -> bool:
        return single_stage(p.index) and single_stage(c.index) and not any(
            q != p.index and kg.has_path(p.index, q) for q in kg.producers(c.index))

    # an edge the analysis cannot read comes back all-to-all: it costs only its own proposal
    edges = analyze_edges(scheduled, keep, Method.AUTO)
    consumer_param = consumer_params(scheduled.module)
    decisions = []
    for e in edges:
        p, c = e.producer.index, e.consumer.index
        if (p, c) in taken:
            continue
        param = consumer_param(p, c)
        link = block_link(e, param) if param is not None else None
        if link is None:
            continue
        blocks = {p: e.producer_grid.blocks, c: e.consumer_grid.blocks}
        infos = [member_info(graph, kg, k, blocks.get) for k in (p, c)]
        members = tuple(MemberRef(m.kernel, m.func, m.ops, m.labels, m.signature, m.out_shape, m.flops, m.chunks)
                        for m in infos)
        funcs = [infos[0].func, infos[1].func]
        mod = scheduled.module
        # the intermediate is still written; its re-read comes from cache, not DRAM
        reread = buffer_bytes(mod[funcs[0]].params[-1])
        # busy cores (SMs): each member alone on its own grid, weighted by its work; fused, both
        # run on the producer's blocks
        before = weighted_busy([max(m.flops, 1.0) for m in infos], [link.producer_blocks, link.consumer_blocks],
                               model.cores)
        gain = Gain(launches_saved=1, parallel_regions_saved=1, member_chunks=(link.producer_blocks,
                    link.consumer_blocks), fused_chunks=link.producer_blocks,
                    utilisation_before=round(before, 4),
                    utilisation_after=round(busy_share(link.producer_blocks, model.cores), 4),
                    estimated_us=round(model.launch_us + model.memory_us(reread), 2),
                    reread_bytes=reread, memory_priced=model.prices_memory)
        status, reason = DecisionStatus.PROPOSED, ""
        try:
            codegen.vertical(mod[funcs[0]], mod[funcs[1]], funcs, link, target)
            gain = gain.with_launch(launch([p, c], link))
        except FusionUnsupported as err:
            status, reason = DecisionStatus.REJECTED, f"the code generator refuses the pair: {err}"
        name = lambda m: m.labels[0] if m.labels else m.func
        evidence = Evidence(f"{name(infos[0])} -> {name(infos[1])}", ((p,), (c,)), no_path=False,
                            no_member_reads_another=False, launch_after=p, first_consumer=c,
                            reorder_needed=c != p + 1, heterogeneous=infos[0].signature != infos[1].signature,
                            link=link)
        decisions.append(FusionDecision(DecisionId(f"d{start + len(decisions)}"), DecisionKind.VERTICAL_BLOCK,
                                        0, members, gain, evidence, status, reason))
    return decisions
