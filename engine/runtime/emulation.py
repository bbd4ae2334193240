"""Run GPU-scheduled PrimFuncs on the CPU, to check GPU schedules without a GPU.

``emulate_on_cpu(mod, permuted=False, seed=1)`` takes a module whose PrimFuncs carry
block-level GPU schedules (as made by ``engine.schedule.gpu.schedule_module``:
``T.thread_binding`` loops over blockIdx/threadIdx/vthread, ``shared``/``local``
``sblock_alloc_buffer``s) and returns a module that
``tvm.compile(..., target=Target({"kind": "llvm"}))`` builds and that computes the same
values. Two modes:

Serial (``permuted=False``): blocks and threads run in launch order.

* every thread-bound loop becomes a serial loop over the same range, in place (the loop
  nest, and so the order of the blocks inside it, is unchanged);
* ``shared``/``shared.dyn``/``local`` buffers become ``global`` ones (same shape and name);
* ``tvm_storage_sync`` calls, if any, become no-ops;
* ``target`` function attributes are dropped (the llvm build supplies its own).

It passes kernels a GPU may get wrong: a missing barrier, a race between threads, a block
reading another block's shared memory or what another block (which on a GPU may not have
run yet) wrote.

Permuted (``permuted=True``; what CUDA verification uses, engine/targets.py): the same
rewrite after engine/runtime/permuted.py has put the blocks of each launch, and the
threads of each barrier-free segment of a block, in an order drawn from ``seed`` (affine
bijections ``(a*i + c) % n``), and engine/runtime/poison.py has filled with poison (NaN
for floats) the outputs at kernel entry (the params after a ``call_tir``'s inputs) and each
block's footprint of its shared/local buffers at block entry. Those kernels then give NaN
or wrong values; a correct kernel only changes its float rounding. Threads of a segment run
as one loop, each running all the segment's thread loops before the next thread starts; a
segment ends at an explicit ``tvm_storage_sync``, at a shared buffer written then read (TVM
inserts a barrier there), and after a cross-thread reduction.

Why running the threads one after another is right for dlight schedules: at block level a
cooperative fetch into shared memory is written as a loop nested *inside* the outer thread
loops and bound again to the same ``threadIdx`` tags. Made serial, that inner loop fetches
the whole tile for every emulated thread (redundant, idempotent), so each thread finds
the tile complete before reading it (in both modes: inner re-bound loops are not permuted).
Cross-thread reductions are reduction blocks whose reduction loop is thread-bound; serial,
they are plain reductions (permuted, thread 0, which runs the init, stays first). The one
pattern that serial threads would get wrong is a re-bound inner loop *reading* a
shared/local buffer that the outer per-thread code writes (it would read other threads'
part before they ran): ``emulate_on_cpu`` checks for it and raises ``EmulationError``
naming the kernel, as it does for warp-level intrinsics, tensor-core fragment scopes and
already-lowered kernels (``launch_thread``/``thread_extent``), which it cannot emulate.
"""

from __future__ import annotations

import tvm
import tvm_ffi
from tvm import ir, relax, tirx
from tvm.s_tir import SBlock
from tvm.tirx import _ffi_api as _tirx_api
from tvm.tirx.buffer import is_buffer_var

from engine.errors import CompileError
from engine.runtime.permuted import permute_func

__all__ = ["EmulationError", "emulate_on_cpu", "emulate_func", "thread_bound_loops"]

# Scopes that hold plain per-thread / per-block arrays: emulated as global memory.
_EMULATED_SCOPES = {"shared", "shared.dyn", "local"}
_GLOBAL_SCOPES = {"", "global"}
# Call names (substrings) whose GPU semantics cannot be reproduced by serial threads.
_UNSUPPORTED_CALLS = (
    "warp",  # tvm_warp_shuffle*, tvm_warp_activemask
    "shfl",
    "thread_allreduce",
    "ptx_",
    "mma",  # tvm_mma_sync, tvm_bmma_sync, ptx_mma*
    "matrix_sync",
    "fill_fragment",
    "ldmatrix",
    "cp_async",
    "atomic",
)
_SYNC_CALLS = ("tirx.tvm_storage_sync", "tir.tvm_storage_sync")
# Function attributes that tie a PrimFunc to a device target.
_TARGET_ATTRS = ("target", "tirx.kernel_launch_params", "calling_conv")


class EmulationError(CompileError):
    """A GPU-scheduled PrimFunc uses something serial CPU emulation cannot reproduce."""


def thread_bound_loops(func: tirx.PrimFunc) -> list[str]:
    """Thread tags of the thread-bound loops of ``func``, in pre-order (one per loop)."""
    tags: list[str] = []

    def on_for(loop):
        if loop.kind == tirx.ForKind.THREAD_BINDING:
            iv = loop.thread_binding
            tags.append(str(iv.thread_tag) if iv is not None else "?")

    tvm_ffi.structural_walk(func, (tirx.For, on_for), order="pre")
    return tags


def _call_name(call) -> str:
    op = call.op
    return str(op.name) if hasattr(op, "name") else str(op)


def _check_supported(func: tirx.PrimFunc, name: str) -> None:
    """Raise EmulationError for constructs serial threads cannot reproduce."""
    problems: list[str] = []

    def on_call(call):
        cname = _call_name(call)
        if any(key in cname for key in _UNSUPPORTED_CALLS):
            problems.append(f"intrinsic {cname}")

    def on_attr(attr):
        if str(attr.attr_key) in ("thread_extent", "virtual_thread"):
            problems.append("lowered thread launch (launch_thread/thread_extent); emulate the "
                            "block-level schedule, before tvm.compile lowers it")

    def on_var(var):
        if is_buffer_var(var):
            scope = str(var.scope())
            if scope not in _GLOBAL_SCOPES and scope not in _EMULATED_SCOPES:
                problems.append(f"buffer {var.name} in scope {scope!r}")

    tvm_ffi.structural_walk(func, [(ir.Call, on_call), (tirx.AttrStmt, on_attr), (ir.Var, on_var)])
    if problems:
        uniq = sorted(set(problems))
        raise EmulationError(f"cannot emulate GPU kernel {name} on the CPU: {'; '.join(uniq)}")


def _check_rebinding_hazard(func: tirx.PrimFunc, name: str) -> None:
    """Refuse kernels where serial threads could read data other threads have not written.

    Look at each outermost loop bound to a threadIdx tag. Accesses under it are per-thread,
    or re-bound (under an inner loop bound to the same tag: the cooperative-fetch pattern).
    Refused: a shared/local buffer written per-thread and read re-bound (the re-bound loop
    reads other threads' part); a shared buffer written and read per-thread under the same
    loop (conservative: thread-private use of shared memory is refused too, dlight never
    emits it). A block reading the buffer it writes (a reduction's accumulator, also a
    cross-thread reduction over a thread-bound reduction loop) is not an exchange: serial
    threads run such a reduction in order.
    """
    stack: list[tuple[int, str]] = []  # (loop id, tag) of the enclosing threadIdx loops
    counter = [0]
    # loop id -> access kind ("w" per-thread write, "r" per-thread read, "R" re-bound read)
    # -> buffer handle -> buffer
    acc: dict[int, dict[str, dict[int, ir.Var]]] = {}
    block_writes: list[set[int]] = []  # buffers written by each enclosing SBlock

    def record(buf, is_write):
        if not is_buffer_var(buf) or str(buf.scope()) in _GLOBAL_SCOPES:
            return
        seen: set[str] = set()
        for loop_id, tag in stack:
            if tag in seen:
                continue  # the outermost loop of each tag owns the access
            seen.add(tag)
            rebound = sum(1 for _, t in stack if t == tag) > 1
            kind = ("W" if rebound else "w") if is_write else ("R" if rebound else "r")
            acc.setdefault(loop_id, {}).setdefault(kind, {})[buf.__chandle__()] = buf

    def on_for(loop, visitor):
        iv = loop.thread_binding
        tag = str(iv.thread_tag) if loop.kind == tirx.ForKind.THREAD_BINDING and iv is not None else ""
        if not tag.startswith("threadIdx."):
            return visitor.default_visit(loop)
        counter[0] += 1
        stack.append((counter[0], tag))
        try:
            return visitor.default_visit(loop)
        finally:
            stack.pop()

    def on_store(store, visitor):
        record(store.buffer, True)
        return visitor.default_visit(store)

    def on_load(load, visitor):  # ir.TensorLoad: a BufferLoad when its source is a buffer
        src = load.source
        if not (is_buffer_var(src) and block_writes and src.__chandle__() in block_writes[-1]):
            record(src, False)
        return visitor.default_visit(load)

    def on_block(block, visitor):
        block_writes.append({w.source.__chandle__() for w in block.writes if is_buffer_var(w.source)})
        try:
            return visitor.default_visit(block)
        finally:
            block_writes.pop()

    tvm_ffi.structural_visit(func, [(tirx.For, on_for), (tirx.BufferStore, on_store),
                                    (ir.TensorLoad, on_load), (SBlock, on_block)])
    for kinds in acc.values():
        written = kinds.get("w", {})
        clash = sorted(b.name for h, b in kinds.get("R", {}).items() if h in written)
        if clash:
            raise EmulationError(
                f"cannot emulate GPU kernel {name} on the CPU: a loop re-bound to a thread tag reads "
                f"{', '.join(clash)}, written per thread by the enclosing thread loop "
                "(serial threads would read values other threads have not produced yet)")
        clash = sorted(b.name for h, b in kinds.get("r", {}).items()
                       if h in written and str(b.scope()).startswith("shared"))
        if clash:
            raise EmulationError(
                f"cannot emulate GPU kernel {name} on the CPU: shared buffer(s) {', '.join(clash)} "
                "written and read per thread under one thread loop (possible exchange between "
                "threads that serial threads would not reproduce)")


def _global_buffer(buf):
    ty = buf.ty
    new_ty = _tirx_api.BufferType("global", ty.dtype, ty.shape, ty.strides, ty.elem_offset,
                                  ty.data_alignment, ty.offset_factor, ty.layout,
                                  ty.allocated_addr, None)
    return _tirx_api.BufferVar(buf.name, new_ty, None)


def emulate_func(func: tirx.PrimFunc, name: str = "main", permuted: bool = False,
                 seed: int = 1, n_inputs: int | None = None) -> tirx.PrimFunc:
    """The llvm-legal version of one GPU-scheduled PrimFunc (see module doc).

    ``permuted``: blocks and threads in an order drawn from ``seed``, block-private memory
    and outputs poisoned (engine/runtime/permuted.py); otherwise launch order, serially.
    ``n_inputs`` (permuted only): the number of leading parameters that are inputs; the
    rest are outputs and are poisoned at entry. None: the written, never read parameters.
    """
    _check_supported(func, name)
    _check_rebinding_hazard(func, name)
    if permuted:
        func = permute_func(func, seed, name, n_inputs)
    remap: dict[int, ir.Var] = {}

    def on_var(var):
        if not is_buffer_var(var) or str(var.scope()) not in _EMULATED_SCOPES:
            return var
        key = var.__chandle__()
        if key not in remap:
            remap[key] = _global_buffer(var)
        return remap[key]

    def on_for(loop):
        if loop.kind != tirx.ForKind.THREAD_BINDING:
            return loop
        return tirx.For(loop.loop_var, loop.min, loop.extent, tirx.ForKind.SERIAL, loop.body,
                        None, loop.annotations, loop.step, loop.span)

    def on_evaluate(stmt):
        value = stmt.value
        if isinstance(value, ir.Call) and _call_name(value) in _SYNC_CALLS:
            return tirx.Evaluate(tvm.tirx.const(0, "int32"))
        return stmt

    new = tvm_ffi.structural_map(
        func, [(tirx.For, on_for), (ir.Var, on_var), (tirx.Evaluate, on_evaluate)], order="pre")
    if new.attrs is not None:
        for key in _TARGET_ATTRS:
            if key in new.attrs:
                new = new.without_attr(key)
    leftover = thread_bound_loops(new)
    if leftover:  # pragma: no cover - structural_map visits every For
        raise EmulationError(f"cannot emulate GPU kernel {name}: thread bindings left ({leftover})")
    return new


def emulate_on_cpu(mod: tvm.IRModule, permuted: bool = False, seed: int = 1) -> tvm.IRModule:
    """A copy of ``mod`` whose PrimFuncs compute the same values serially on the CPU.

    ``permuted``/``seed``: the mode of ``emulate_func`` (permuted order, poison).
    Relax functions are kept as they are; PrimFuncs without thread bindings pass through
    (their scopes are still made global). Raises ``EmulationError`` naming the first kernel
    that cannot be emulated. Build the result with ``tvm.compile(mod, target=llvm)``.
    """
    mod = mod.clone()
    inputs = _call_tir_inputs(mod) if permuted else {}
    updates = {}
    for gv, func in mod.functions_items():
        if isinstance(func, tirx.PrimFunc):
            updates[gv] = emulate_func(func, gv.name_hint, permuted, seed, inputs.get(gv.name_hint))
    for gv, func in updates.items():
        mod[gv] = func
    return mod


def _call_tir_inputs(mod: tvm.IRModule) -> dict[str, int]:
    """Kernel name -> number of inputs its ``call_tir`` sites pass (the other params are
    fresh outputs). A ``call_tir_inplace`` kernel counts all its params as inputs (its
    outputs hold data); kernels called with differing counts, or not at all, are left out."""
    counts: dict[str, set[int]] = {}

    def on_call(call):
        op = str(getattr(call.op, "name", ""))
        if op not in ("relax.call_tir", "relax.call_tir_inplace") or len(call.args) < 2:
            return
        gv, args = call.args[0], call.args[1]
        if op == "relax.call_tir_inplace":
            n = len(mod[gv].params)
        else:
            n = len(args.fields) if isinstance(args, relax.Tuple) else 1
        counts.setdefault(gv.name_hint, set()).add(n)

    for _, func in mod.functions_items():
        if isinstance(func, relax.Function):
            tvm_ffi.structural_walk(func, (relax.Call, on_call))
    return {name: next(iter(ns)) for name, ns in counts.items() if len(ns) == 1}
