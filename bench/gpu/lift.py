"""Builds whose weights are parameters of `main` instead of constants inside the library
(runs HERE, with the full TVM; pack.py uses it for every library it ships).

    built = build_weights_as_inputs(mod, target)          # mod: what `tvm.compile` would get
    built.executable                                       # main(*inputs, *weights)
    built.weights                                          # numpy arrays, in parameter order

Why: a payload ships several libraries per model (one per variant, plus stock TVM). With the
weights embedded, each library would carry its own copy; lifted, the variants of one model
share ONE weights file and each library holds code only.

What changes and what does not: the Relax pipeline is `tvm.compile`'s own for the target
(`relax.get_default_pipeline(target)` for GPU targets, `default_build_pipeline()` otherwise)
with one pass inserted, `LiftWeights`, where every constant folding of that pipeline is
done (GPU: after its legalize passes, i.e. LegalizeOps ... FoldConstant ... FuseTIR, dlight;
other targets: first, as that pipeline folds nothing). So the kernels are exactly those of
the embedded build; only where the weights live differs: `main` takes every constant of at
least `min_bytes` as an extra parameter, after its inputs (`num_input` marks where the
weights start). The cost is the VM's per-call check of each extra parameter (shape, dtype,
device): pack.py ships an embedded control build of the small models (`base-embedded`) so
the GPU run measures it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tvm
import tvm_ffi
from tvm import relax

DEFAULT_MIN_BYTES = 4096  # smaller constants (biases, scalars) stay in the library


@dataclass(frozen=True, eq=False)
class LiftedBuild:
    executable: object  # tvm.relax Executable; main(*inputs, *weights)
    weights: tuple[np.ndarray, ...]  # in parameter order, after the model's inputs
    kernels: tuple[str, ...]  # PrimFuncs of the final module (what the VM calls per kernel)
    fingerprint: int  # structural hash of the final module: equal builds compare equal


def lift_weights(mod: tvm.IRModule, min_bytes: int = DEFAULT_MIN_BYTES) -> tuple[tvm.IRModule, list[np.ndarray]]:
    """`mod` with main's tensor constants of >= min_bytes turned into trailing parameters.

    >>> lifted, weights = lift_weights(mod)     # main(x) -> main(x, w0, w1, ...)
    """
    main_gv = mod.get_global_var("main")
    func = mod[main_gv]
    params, values = [], []

    def on_const(const):
        array = const.value.numpy()
        if array.nbytes < min_bytes:
            return const
        var = relax.Var(f"w{len(params)}", const.ty)
        params.append(var)
        values.append(array)
        return var

    body = tvm_ffi.structural_map(func.body, (tvm.ir.GenericConst, on_const))
    if not params:
        return mod, []
    attrs = dict(func.attrs) if func.attrs is not None else {}
    attrs.setdefault("num_input", len(func.params))
    new = relax.Function(list(func.params) + params, body, func.ret_ty, func.is_pure,
                         tvm.ir.make_node("ir.DictAttrs", **attrs))
    functions = {gv: (new if gv.same_as(main_gv) else f) for gv, f in mod.functions.items()}
    return tvm.IRModule(functions, attrs=mod.attrs), values


def build_weights_as_inputs(mod: tvm.IRModule, target: tvm.target.Target,
                            min_bytes: int = DEFAULT_MIN_BYTES) -> LiftedBuild:
    """`tvm.compile(mod, target)` with the weights lifted out (see the module docstring)."""
    lifted: list[np.ndarray] = []
    final: list[tvm.IRModule] = []

    @tvm.transform.module_pass(opt_level=0, name="LiftWeights")
    def lift(m, _ctx):
        m, values = lift_weights(m, min_bytes)
        lifted.extend(values)
        return m

    @tvm.transform.module_pass(opt_level=0, name="KeepFinal")
    def keep(m, _ctx):
        final.append(m)
        return m

    if "gpu" in target.keys:  # the branch tvm.compile takes (relax.vm_build.build)
        if target.kind.name != "cuda":
            raise ValueError(f"weights as inputs: only cuda among GPU targets, not {target.kind.name}")
        from tvm.relax.backend.cuda import pipeline as gpu  # = relax.get_default_pipeline(target)

        passes = (gpu.library_dispatch_passes(target) + gpu.legalize_passes(target) + [lift]
                  + gpu.dataflow_lower_passes(target) + gpu.finalize_passes(target))
    else:
        passes = [lift, relax.pipeline.default_build_pipeline()]
    executable = tvm.compile(mod, target=target, relax_pipeline=tvm.transform.Sequential(passes + [keep]))
    [out] = final
    kernels = tuple(sorted(gv.name_hint for gv, f in out.functions.items() if isinstance(f, tvm.tirx.PrimFunc)))
    return LiftedBuild(executable, tuple(lifted), kernels, int(tvm_ffi.structural_hash(out)))
