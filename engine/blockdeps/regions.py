"""Per-block regions of one kernel launch (fast boxes) as BlockRegion facts.

>>> # block_regions(Session("fire_module").scheduled("cuda"), 3, blocks=[0])
>>> # -> (BlockRegion(func=..., block=0, buffer='lv8', kind=AccessKind.READ, start=(0, 0, 0, 0), stop=(1, 16, 1, 32)), ...)
"""

from __future__ import annotations

from typing import Iterable

from .facts import AccessKind, BlockRegion
from .footprints import block_boxes
from .kernel_access import kernel_accesses
from .kernel_edges import kernel_inputs


def block_regions(scheduled, kernel: int, blocks: Iterable[int] | None = None,
                  include_constants: bool = False) -> tuple[BlockRegion, ...]:
    """Boxes each block of launch `kernel` reads of its inputs and writes of its outputs.
    Inputs that are neither kernel outputs nor model inputs (weights) are left out unless
    `include_constants`."""
    from .analysis import BlockDepsError

    launches, inputs, _ = kernel_inputs(scheduled.module)
    if not 0 <= kernel < len(launches):
        raise BlockDepsError(f"no kernel k{kernel}; the model has {len(launches)} launches")
    launch = launches[kernel]
    ka = kernel_accesses(scheduled.module[launch.func], launch.func, launch.n_inputs)
    fed = {i.param for i in inputs if i.consumer == kernel}
    main_params = _main_var_params(scheduled.module, kernel)
    chosen = list(range(ka.grid.blocks)) if blocks is None else list(blocks)
    out = []
    for param, p in enumerate(ka.params):
        if not (p.is_output or include_constants or param in fed or param in main_params):
            continue
        kind = AccessKind.WRITE if p.is_output else AccessKind.READ
        boxes = block_boxes(ka, param, kind)
        for b in chosen:
            out.append(BlockRegion(ka.func, b, p.name, kind, tuple(int(v) for v in boxes.lo[b]),
                                   tuple(int(v) for v in boxes.hi[b])))
    return tuple(out)


def _main_var_params(mod, kernel: int) -> set[int]:
    """Params bound to Relax vars (model inputs included), not to constants."""
    from tvm import relax

    k = 0
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.call_tir":
                if k == kernel:
                    args = list(v.args[1].fields) if isinstance(v.args[1], relax.Tuple) else [v.args[1]]
                    return {i for i, a in enumerate(args) if isinstance(a, relax.Var)}
                k += 1
    return set()
