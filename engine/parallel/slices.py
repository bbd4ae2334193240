"""Concatenations without the copy: the producers of a concat write their blocks straight
into its output's slices, and the concat kernel is not launched.

    a = call_tir(f, (x, w1))            t = call_tir(into_slices, (x, w1, y, w2), out_ty=T_cat)
    b = call_tir(g, (y, w2))     ->     (f's loops writing t[:, 0:64], then g's writing t[:, 64:128])
    c = call_tir(concat, (a, b))        c = t

Each producer's block map onto the concat is one-to-one into a slice: its block writes
exactly the elements the concat would copy. A producer qualifies when the concat is the
only reader of its single output; its scheduled loops are kept as they are, only the
output's accesses move to the slice (index + offset on the concat axis). A one-input copy
that permutes one axis (a channel shuffle) is taken the same way: its producer writes each
element where the copy would put it (the copy's index map, inverted).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import tvm
import tvm_ffi
from tvm import ir, relax, sym, tirx
from tvm.s_tir import SBlock, SBlockRealize

from engine.parallel.detection import member_info
from engine.parallel.gain import weighted_busy
from engine.parallel.kernel_graph import (KernelGraph, alias_roots, call_args, is_call_tir, key, main_bindings,
                                          use_counts)
from engine.parallel.plan import (DecisionId, DecisionKind, DecisionStatus, Evidence, FusionDecision, Gain,
                                  MemberRef, SliceLink)
from engine.parallel.relax_rewrite import member_vars
from engine.parallel.tir_util import (OP_PATTERN_OPAQUE, FusionUnsupported, buffer_bytes, count, fresh_copy,
                                      move_accesses, root_parts, substitute, walk)


def _static(shape) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def concat_axis(in_shapes: list[tuple[int, ...]], out_shape: tuple[int, ...]) -> int | None:
    """The axis a concat of these shapes joins on (None: not a concat of these shapes)."""
    if not in_shapes or any(len(s) != len(out_shape) for s in in_shapes):
        return None
    for axis in range(len(out_shape)):
        same = all(s[a] == out_shape[a] for s in in_shapes for a in range(len(out_shape)) if a != axis)
        if same and sum(s[axis] for s in in_shapes) == out_shape[axis]:
            return axis
    return None


@dataclass(frozen=True, eq=False)
class Epilogue:
    """What a concat kernel stores for each joined input element x: `expr` over `x` (x itself
    for a plain concat, max(x, 0) for a concat that FuseOps fused with a relu). A one-input
    copy that permutes one axis (a channel shuffle) has `inverse`: input index -> the output
    index that holds it."""

    x: tirx.Var
    expr: tirx.PrimExpr
    inverse: object = None  # tirx.IndexMap
    axis: int = -1  # the axis `inverse` permutes

    @property
    def identity(self) -> bool:
        return self.expr.same_as(self.x)

    def apply(self, value: tirx.PrimExpr) -> tirx.PrimExpr:
        return value if self.identity else substitute(self.expr, {self.x.__chandle__(): value})


def _leaves(expr) -> list:
    """The values an if_then_else chain selects among (the expression itself otherwise)."""
    if isinstance(expr, ir.Call) and str(expr.op.name).endswith("if_then_else"):
        return _leaves(expr.args[1]) + _leaves(expr.args[2])
    return [expr]


def _selects_slices(func: tirx.PrimFunc, store, leaves) -> bool:
    """Each selected load reads its input at the stored index, less the input's offset on
    the concat axis (inputs in parameter order): a concatenation, not some other select."""
    shapes = [_static(p.shape) for p in func.params]
    if None in shapes:
        return False
    axis = concat_axis(shapes[:-1], shapes[-1])
    if axis is None:
        return False
    offsets, at = {}, 0
    for p, shape in zip(func.params[:-1], shapes[:-1]):
        offsets[p.__chandle__()] = at
        at += shape[axis]
    analyzer = sym.Analyzer()
    for leaf in leaves:
        shift = offsets[leaf.source.__chandle__()]
        for d, (got, at_out) in enumerate(zip(leaf.indices, store.indices)):
            want = at_out - shift if d == axis and shift else at_out
            if not analyzer.can_prove_equal(got, want):
                return False
    return True


def _permutation(block, store, source) -> Epilogue | None:
    """A one-input copy whose output index i reads input index g(i), g permuting one axis
    and no other (a channel shuffle's reshape-transpose-reshape); None otherwise."""
    loads: list = []
    walk(store.value, ir.expr.TensorLoad, loads.append)
    if len(loads) != 1 or not loads[0].source.same_as(source):
        return None
    iters = [iv.var for iv in block.iter_vars]
    if len(iters) != len(store.indices) or not all(i.same_as(v) for i, v in zip(store.indices, iters)):
        return None
    extents = [iv.dom.extent for iv in block.iter_vars]
    if _static(source.shape) != _static(extents):  # the copy keeps the shape, reordering one axis
        return None
    try:
        inverse = tirx.IndexMap(iters, list(loads[0].indices), None).inverse(extents)
    except Exception:  # TVM: not a bijection it can invert
        return None
    analyzer = sym.Analyzer()
    probe = [tirx.Var(f"i{d}", "int64") for d in range(len(iters))]
    for var, extent in zip(probe, extents):
        analyzer.bind(var, ir.Range.from_min_extent(tirx.IntImm("int64", 0), extent))
    moved = [d for d, (a, b) in enumerate(zip(inverse.map_indices(probe), probe))
             if not analyzer.can_prove_equal(a, b)]
    if len(moved) != 1:  # a plain copy, or a transpose of several axes: not taken
        return None
    load = loads[0]
    x = tirx.Var("x", store.value.ty)
    expr = tvm_ffi.structural_map(store.value, (ir.expr.TensorLoad, lambda n: x if n.same_as(load) else n))
    return Epilogue(x, expr, inverse, moved[0])


def concat_epilogue(func: tirx.PrimFunc) -> Epilogue | None:
    """The epilogue of a concat kernel: one computing block storing an elementwise function
    of the if_then_else chain that selects among loads of each of its inputs; None when
    `func` is not such a kernel."""
    blocks: list = []
    walk(func.body, SBlock, blocks.append)
    compute = [b for b in blocks if len(b.iter_vars)]
    if len(compute) != 1 or not isinstance(compute[0].body, tirx.BufferStore) or len(func.params) < 2:
        return None
    store = compute[0].body
    if not store.buffer.same_as(func.params[-1]):
        return None
    if len(func.params) == 2:
        return _permutation(compute[0], store, func.params[0])
    calls: list = []
    walk(store.value, ir.Call, calls.append)
    joins = [c for c in calls if str(c.op.name).endswith("if_then_else")]
    if not joins:
        return None
    join = joins[0]  # pre-order: the outermost
    leaves = _leaves(join)
    inputs = {p.__chandle__() for p in func.params[:-1]}
    sources = [leaf.source.__chandle__() if isinstance(leaf, ir.expr.TensorLoad) else None for leaf in leaves]
    if sorted(x for x in sources if x is not None) != sorted(inputs) or None in sources:
        return None
    if not _selects_slices(func, store, leaves):
        return None
    x = tirx.Var("x", store.value.ty)
    expr = tvm_ffi.structural_map(store.value, (ir.Call, lambda c: x if c.same_as(join) else c))
    if count(expr, ir.expr.TensorLoad):  # it reads something besides the joined element
        return None
    return Epilogue(x, expr)


def _plain(expr) -> str:
    """An index expression as text without TVMScript's int64 wrappers."""
    return re.sub(r"T\.int64\((-?\d+)\)", r"\1", str(expr))


def slice_link(mod: tvm.IRModule, producers: list[relax.Var], concat: relax.Var,
               labels: list[str] | None = None) -> SliceLink:
    """Why the producers can write into `concat`'s slices; FusionUnsupported (one line, naming
    a producer by its entry in `labels`, else its Var) when they cannot: every argument of the
    concat must be one of them, each read by the concat only, with one output."""
    bindings = main_bindings(mod)
    value = {key(b.var): b.value for b in bindings}
    roots = alias_roots(bindings)
    call = value.get(key(concat))
    epilogue = concat_epilogue(mod[call.args[0].name_hint]) if is_call_tir(call) else None
    if epilogue is None:
        raise FusionUnsupported("the consumer is not a concat kernel")
    args = call_args(call)
    made = [roots.get(key(a), key(a)) if isinstance(a, relax.Var) else None for a in args]
    wanted = [key(p) for p in producers]
    if sorted(x for x in made if x is not None) != sorted(wanted) or None in made:
        raise FusionUnsupported("the concat reads values other than the producers' outputs")
    uses = use_counts(mod)
    for i, p in enumerate(producers):
        name = labels[i] if labels else p.name
        if not is_call_tir(value.get(key(p))) or isinstance(p.ty, relax.TupleType):
            raise FusionUnsupported(f"{name} is not a one-output kernel call")
        if uses[key(p)] != 1:
            raise FusionUnsupported(f"{name} is read by more than the concat")
    in_shapes = [_static(a.ty.shape) for a in args]
    out_shape = _static(concat.ty.shape)
    if out_shape is None or None in in_shapes:
        raise FusionUnsupported("the concat's shapes are not static")
    epilogue_text = "" if epilogue.identity else _plain(epilogue.expr)
    if epilogue.inverse is not None:  # a permuting copy: the whole output, reordered
        j = tirx.Var("j", "int64")
        probe = [j if d == epilogue.axis else tirx.IntImm("int64", 0) for d in range(len(out_shape))]
        moved = epilogue.inverse.map_indices(probe)[epilogue.axis]
        return SliceLink(epilogue.axis, (0,), (out_shape[epilogue.axis],), out_shape, epilogue_text,
                         _plain(sym.Analyzer().simplify(moved)))
    axis = concat_axis(in_shapes, out_shape)
    if axis is None:
        raise FusionUnsupported("the concat's shapes do not join on one axis")
    offsets, at = {}, 0
    for m, s in zip(made, in_shapes):
        offsets[m] = at
        at += s[axis]
    order = [key(p) for p in producers]
    extents = {m: s[axis] for m, s in zip(made, in_shapes)}
    return SliceLink(axis, tuple(offsets[k] for k in order), tuple(extents[k] for k in order), out_shape,
                     epilogue_text)


def _placement(link: SliceLink, epilogue: Epilogue, i: int):
    """(indices -> indices, region -> region) taking producer i's output accesses to the
    concat's output: its offset on the axis, or the permuting copy's inverse map (a range
    on the permuted axis then covers the whole axis)."""
    axis = link.axis
    if epilogue.inverse is not None:
        full = ir.Range.from_min_extent(tirx.IntImm("int64", 0), tirx.IntImm("int64", link.out_shape[axis]))
        return (lambda idx: list(epilogue.inverse.map_indices(idx))), \
            (lambda region: [full if d == axis else r for d, r in enumerate(region)])
    off = tirx.IntImm("int64", link.offsets[i])
    return ((lambda idx: [x + off if d == axis else x for d, x in enumerate(idx)]),
            (lambda region: [ir.Range.from_min_extent(r.min + off, r.extent) if d == axis else r
                             for d, r in enumerate(region)]))


def _into(node, buf: ir.Var, big: ir.Var, place, epilogue: Epilogue):
    """`node` with every access of `buf` moved to `big` (`place`: from _placement), each
    stored value passed through `epilogue` (the concat's own, e.g. a relu)."""
    h = buf.__chandle__()
    if not epilogue.identity and count(node, ir.expr.TensorLoad, lambda n: n.source.__chandle__() == h):
        raise FusionUnsupported(f"{buf.name}: the producer reads its output back, so the concat's "
                                f"epilogue cannot be applied as it writes")
    return move_accesses(node, buf, big, *place, epilogue.apply)


def fuse_into_slices(funcs: list[tirx.PrimFunc], names: list[str], concat: tirx.PrimFunc, link: SliceLink,
                     horizontal=None, in_turn: bool = True) -> tirx.PrimFunc:
    """One PrimFunc computing every producer, each writing its slice of the output of
    `concat` (the concat kernel; its last parameter), through the concat's epilogue.
    `horizontal(funcs, names)`: the target's horizontal fusion (one parallel loop shared by
    the producers, outputs last); where it refuses the producers, or is None, their loops run
    one after the other (`in_turn`; else the refusal stands)."""
    epilogue = concat_epilogue(concat)
    if epilogue is None:
        raise FusionUnsupported("the consumer is not a concat kernel")
    if horizontal is not None and len(funcs) > 1:
        try:
            fused = horizontal(funcs, names)
        except FusionUnsupported:
            if not in_turn:
                raise
            fused = None
        if fused is not None:
            n = len(funcs)
            outs = list(fused.params[-n:])
            big = _concat_buffer(link, outs[0].dtype)
            body = fused.body
            for i, out in enumerate(outs):
                body = _into(body, out, big, _placement(link, epilogue, i), epilogue)
            return tirx.PrimFunc(list(fused.params[:-n]) + [big], body, ret_type=fused.ret_type, attrs=fused.attrs)
    parts = [root_parts(fresh_copy(f), n) for f, n in zip(funcs, names)]
    big = _concat_buffer(link, parts[0].output.dtype)
    bodies = [_into(p.body, p.output, big, _placement(link, epilogue, i), epilogue)
              for i, p in enumerate(parts)]
    allocs = [a for p in parts for a in p.allocs]
    root = SBlock([], [], [], "root", tirx.SeqStmt(bodies) if len(bodies) > 1 else bodies[0], None, allocs)
    # opaque: a build that re-runs FuseOps (cuda's) must not merge it with a neighbour
    attrs = tvm.ir.make_node("ir.DictAttrs", **{"tirx.is_scheduled": True, "tirx.noalias": True,
                                                "op_pattern": OP_PATTERN_OPAQUE})
    params = [p for part in parts for p in part.inputs] + [big]
    return tirx.PrimFunc(params, SBlockRealize([], True, root), ret_type=funcs[0].ret_type, attrs=attrs)


def _concat_buffer(link: SliceLink, dtype) -> ir.Var:
    return tirx.decl_buffer([tirx.IntImm("int64", d) for d in link.out_shape], dtype, "T_concat")


def propose_slices(scheduled, graph, kg: KernelGraph, start: int, model, chunks, fuse,
                   launch=lambda ks: None) -> list[FusionDecision]:
    """Decisions d{start}.. for every concat kernel fed by kernels: proposed when each of
    them can write into its slice, else listed rejected with the reason. `chunks(k)`: kernel
    k's parallel chunks (for the utilisation figures); `fuse(funcs, names, concat, link)`:
    the target's code generator, run once here as a dry run; `launch(kernels)`: the launch
    facts of the producers fused (engine.parallel.propose; None where the target has none)."""
    mod = scheduled.module
    decisions = []
    for c, kc in enumerate(kg.kernels):
        if concat_epilogue(mod[kc.func]) is None:
            continue
        producers = sorted({s for s in kg.inputs_of[c] if isinstance(s, int)})
        if not producers:
            continue
        ks = [*producers, c]
        infos = [member_info(graph, kg, k, chunks) for k in ks]
        members = tuple(MemberRef(m.kernel, m.func, m.ops, m.labels, m.signature, m.out_shape, m.flops, m.chunks)
                        for m in infos)
        name = lambda m: m.labels[0] if m.labels else m.func
        status, reason, link = DecisionStatus.PROPOSED, "", None
        try:
            *pvars, cvar = member_vars(mod, ks)
            link = slice_link(mod, pvars, cvar, [name(m) for m in infos[:-1]])
            names = [kg.kernels[k].func for k in producers]
            fuse([mod[n] for n in names], names, mod[kc.func], link)
        except FusionUnsupported as err:
            status, reason = DecisionStatus.REJECTED, f"the producers cannot write into the slices: {err}"
        kept = buffer_bytes(mod[kc.func].params[-1])  # the producers' outputs, as one tensor
        work = [max(m.flops, 1.0) for m in infos]
        busy = [max(m.chunks, 1) for m in infos]
        # the producers' loops run as they did; the concat's copy (a read and a write of its
        # output) and its launch are gone
        gain = Gain(launches_saved=len(producers), parallel_regions_saved=1, member_chunks=tuple(busy),
                    fused_chunks=max(busy[:-1]),
                    utilisation_before=round(weighted_busy(work, busy, model.cores), 4),
                    utilisation_after=round(weighted_busy(work[:-1], busy[:-1], model.cores), 4),
                    estimated_us=round(model.launch_us * len(producers) + model.memory_us(2 * kept), 2),
                    kept_bytes=kept, memory_priced=model.prices_memory)
        evidence = Evidence(f"{' + '.join(name(m) for m in infos[:-1])} -> {name(infos[-1])}",
                            tuple((k,) for k in ks), no_path=False, no_member_reads_another=False,
                            launch_after=max(producers), first_consumer=c, reorder_needed=False,
                            heterogeneous=len({m.signature for m in infos[:-1]}) > 1, slices=link)
        if status is DecisionStatus.PROPOSED:
            try:
                gain = gain.with_launch(launch(producers))
            except FusionUnsupported as err:
                status, reason = DecisionStatus.REJECTED, f"the code generator refuses the producers: {err}"
        decisions.append(FusionDecision(DecisionId(f"d{start + len(decisions)}"), DecisionKind.VERTICAL_SLICES,
                                        0, members, gain, evidence, status, reason))
    return decisions
