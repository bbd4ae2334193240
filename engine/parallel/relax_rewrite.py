"""Replace member `call_tir`s in `main` by one call of the fused kernel.

    lv3 = call_tir(f1, (x, w1), out_ty=T1)          t = call_tir(hfused, (x, w1, y, w2), out_ty=[T1, T2])
    lv5 = call_tir(f2, (y, w2), out_ty=T2)    ->    lv3 = t[0]
                                                    lv5 = t[1]

The member Vars are kept (bound to TupleGetItem), so every consumer stays valid. The
bindings are re-ordered by a stable topological sort: the fused call goes where all its
inputs are ready and before the first consumer of any member.
"""

from __future__ import annotations

import heapq

import tvm
from tvm import relax, tirx

from engine.parallel.kernel_graph import alias_roots, call_args, is_call_tir, key, main_bindings
from engine.parallel.tir_util import FusionUnsupported


def member_vars(mod: tvm.IRModule, kernel_indices) -> list[relax.Var]:
    """The binding Vars of the call_tir launch sites with these positions (KernelCall.index)."""
    calls = [b.var for b in main_bindings(mod) if is_call_tir(b.value)]
    return [calls[k] for k in kernel_indices]


def call_of(mod: tvm.IRModule, var: relax.Var):
    """The call_tir bound to `var` in `main`, or None (not a launch site any more)."""
    for b in main_bindings(mod):
        if b.var.same_as(var):
            return b.value if is_call_tir(b.value) else None
    return None


def replace_with_fused(mod: tvm.IRModule, members: list[relax.Var], fused: tirx.PrimFunc,
                       name: str, written: tuple[int, ...] | None = None) -> tuple[tvm.IRModule, str]:
    """A new module whose `main` calls `fused` once instead of the members' kernels.
    `written`: the members whose outputs the fused kernel writes (None: all); the others'
    outputs live only inside it, so nothing else in `main` may read them. Returns the module
    and the name of the kernel the call runs: `name`, or an identical function's already in
    the module (the block builder reuses it: identical blocks of a model share one kernel)."""
    main = mod["main"]
    blocks = list(main.body.blocks)
    where = {key(b.var): i for i, blk in enumerate(blocks) for b in blk.bindings}
    homes = {where.get(key(v)) for v in members}
    if None in homes or len(homes) != 1:
        raise FusionUnsupported("members are not launch sites of one binding block of main")
    home = homes.pop()
    block = blocks[home]
    bindings = list(block.bindings)
    pos = {key(b.var): i for i, b in enumerate(bindings)}
    member_pos = [pos[key(v)] for v in members]
    calls = [bindings[p].value for p in member_pos]
    if not all(is_call_tir(c) for c in calls):
        raise FusionUnsupported("a member is no longer a kernel call (fused by another decision?)")

    bb = relax.BlockBuilder(mod)
    gv = bb.add_func(fused, name)
    mod = bb.get()
    # A member reading another member's output (block-level vertical fusion) reads it inside
    # the fused kernel: that argument is not passed.
    inner = {key(v) for v in members}
    roots = alias_roots(bindings)
    args = [a for c in calls for a in call_args(c)
            if not (isinstance(a, relax.Var) and roots.get(key(a), key(a)) in inner)]
    kept = [p for i, p in enumerate(member_pos) if written is None or i in written]
    hidden = {key(bindings[p].var) for p in member_pos if p not in kept}
    if hidden and any(roots.get(key(v), key(v)) in hidden for b in bindings if key(b.var) not in inner
                      and not isinstance(b.value, relax.Var) for v in relax.analysis.free_vars(b.value)):
        raise FusionUnsupported("an output the fused kernel keeps inside is read elsewhere")
    call = bb.normalize(relax.call_tir(gv, relax.Tuple(args), [bindings[p].var.ty for p in kept]))
    var_cls = relax.DataflowVar if isinstance(block, relax.DataflowBlock) else relax.Var
    if len(kept) == 1:  # one output: the call returns a tensor, bound to that member's Var
        tuple_var = bindings[kept[0]].var
        fused_bindings = [relax.VarBinding(tuple_var, call)]
    else:
        tuple_var = var_cls(name, call.ty)
        fused_bindings = [relax.VarBinding(tuple_var, call)] + [
            relax.VarBinding(bindings[p].var, relax.TupleGetItem(tuple_var, i))
            for i, p in enumerate(kept)]

    # Stable topological order: nodes are the other bindings plus one node for the fusion.
    FUSED = -1
    node_of = {key(b.var): i for i, b in enumerate(bindings)}
    for p in member_pos:
        node_of[key(bindings[p].var)] = FUSED
    nodes = [i for i in range(len(bindings)) if i not in member_pos] + [FUSED]
    prio = {i: i for i in nodes}
    prio[FUSED] = min(member_pos)
    deps: dict[int, set[int]] = {}
    for n in nodes:
        values = args if n == FUSED else [bindings[n].value]
        deps[n] = {node_of[key(v)] for val in values for v in relax.analysis.free_vars(val)
                   if key(v) in node_of} - {n}
    users: dict[int, list[int]] = {n: [] for n in nodes}
    for n, ds in deps.items():
        for d in ds:
            users[d].append(n)
    waiting = {n: len(ds) for n, ds in deps.items()}
    ready = [(prio[n], n) for n in nodes if waiting[n] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, n = heapq.heappop(ready)
        order.append(n)
        for u in users[n]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, (prio[u], u))
    if len(order) != len(nodes):
        raise FusionUnsupported("fusing these kernels would create a cycle (a member depends on another)")
    new_bindings = [b for n in order for b in (fused_bindings if n == FUSED else [bindings[n]])]
    new_block = (relax.DataflowBlock(new_bindings) if isinstance(block, relax.DataflowBlock)
                 else relax.BindingBlock(new_bindings))
    blocks[home] = new_block
    new_main = relax.Function(main.params, relax.SeqExpr(blocks, main.body.body), main.ret_ty,
                              main.is_pure, main.attrs)
    mod.update_func(mod.get_global_var("main"), new_main)
    return relax.transform.Normalize()(_drop_unused_prim_funcs(mod)), gv.name_hint


def _drop_unused_prim_funcs(mod: tvm.IRModule) -> tvm.IRModule:
    used = {b.value.args[0].name_hint for b in main_bindings(mod) if is_call_tir(b.value)}
    for gv, func in list(mod.functions_items()):
        if isinstance(func, tirx.PrimFunc) and gv.name_hint not in used:
            del mod[gv]
    return mod
