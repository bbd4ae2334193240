"""Propose row-band block-level fusion (BlockDepend's one-to-few case, engine.parallel.
codegen.cpu_rows): a producer -> consumer pair whose parallel chunks are (tile, row) and
whose consumer rows read a window of producer rows (a 3x3 conv's halo, a pointwise conv
after a depthwise one), fused so the intermediate lives only in a per-task scratch of the
band's rows. A pair is proposed when the consumer is the intermediate's only reader (it
then needs no main-memory copy), no other dependency path joins them, and the code
generator finds the row structure in both kernels' per-chunk footprints. Nothing here
changes IR.
"""

from __future__ import annotations

from engine.parallel.codegen.cpu_rows import WouldNotPay
from engine.parallel.detection import member_info
from engine.parallel.gain import busy_share, weighted_busy
from engine.parallel.kernel_graph import KernelGraph, is_call_tir, key, main_bindings, use_counts
from engine.parallel.plan import (DecisionId, DecisionKind, DecisionStatus, Evidence, FusionDecision, Gain,
                                  MemberRef, RowLink)
from engine.parallel.tir_util import FusionUnsupported
from engine.parallel.vertical import consumer_params


def sole_readers(mod):
    """(producer, consumer) -> the consumer's argument position of the producer's output when
    that call is its only use in `main` (no other kernel, no output, read once), else None;
    the uses are counted once per module, aliases (`lv = lv1`) looked through."""
    uses = use_counts(mod)
    calls = [b for b in main_bindings(mod) if is_call_tir(b.value)]
    position = consumer_params(mod)

    def reader(producer: int, consumer: int) -> int | None:
        param = position(producer, consumer)
        return param if param is not None and uses[key(calls[producer].var)] == 1 else None

    return reader


def propose_rows(scheduled, graph, kg: KernelGraph, codegen, start: int, model, target) -> list[FusionDecision]:
    """Decisions d{start}.. for every pair the row-band code generator accepts (a dry run
    per pair)."""
    if codegen.rows is None:
        return []
    mod = scheduled.module
    sole_reader = sole_readers(mod)
    decisions = []
    for c in range(len(kg.kernels)):
        for p in dict.fromkeys(kg.producers(c)):
            if any(q != p and kg.has_path(p, q) for q in kg.producers(c)):
                continue
            param = sole_reader(p, c)
            if param is None:
                continue
            funcs = [kg.kernels[p].func, kg.kernels[c].func]
            status, reason = DecisionStatus.PROPOSED, ""
            try:
                link = codegen.rows.link(mod[funcs[0]], mod[funcs[1]], funcs, param, target)
            except WouldNotPay as err:  # listed, with the reason, so a user sees why it is not fused
                link, status, reason = err.link, DecisionStatus.REJECTED, f"it would not pay: {err}"
            except FusionUnsupported:
                continue  # no row structure: not a candidate (most pairs), nothing to list
            decisions.append(_decision(f"d{start + len(decisions)}", graph, kg, p, c, link, model, status, reason))
    return decisions


def _decision(did: str, graph, kg: KernelGraph, p: int, c: int, link: RowLink, model,
              status: DecisionStatus = DecisionStatus.PROPOSED, reason: str = "") -> FusionDecision:
    chunks = {p: link.producer_chunks, c: link.consumer_chunks}
    infos = [member_info(graph, kg, k, chunks.get) for k in (p, c)]
    members = tuple(MemberRef(m.kernel, m.func, m.ops, m.labels, m.signature, m.out_shape, m.flops, m.chunks)
                    for m in infos)
    gain = Gain(launches_saved=1, parallel_regions_saved=link.regions_saved,
                member_chunks=(link.producer_chunks, link.consumer_chunks), fused_chunks=link.tasks,
                utilisation_before=round(weighted_busy([max(m.flops, 1.0) for m in infos],
                                                       [link.producer_chunks, link.consumer_chunks], model.cores), 4),
                utilisation_after=round(busy_share(link.tasks, model.cores), 4),
                estimated_us=round(model.launch_us + model.memory_us(link.kept_bytes)
                                   - link.recomputed * infos[0].flops / (model.flops_per_us_per_core * model.cores), 2),
                kept_bytes=link.kept_bytes, scratch_bytes=link.scratch_bytes, recomputed=link.recomputed,
                memory_priced=model.prices_memory)
    name = lambda m: m.labels[0] if m.labels else m.func
    evidence = Evidence(f"{name(infos[0])} -> {name(infos[1])}", ((p,), (c,)), no_path=False,
                        no_member_reads_another=False, launch_after=p, first_consumer=c,
                        reorder_needed=c != p + 1, heterogeneous=infos[0].signature != infos[1].signature,
                        rows=link)
    return FusionDecision(DecisionId(did), DecisionKind.VERTICAL_ROWS, 0, members, gain, evidence, status, reason)
