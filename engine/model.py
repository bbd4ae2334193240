"""Model loading: a file path or `zoo:NAME` -> a validated, static-shaped ONNX model.

Shape arithmetic (torch exports' Shape -> Gather -> Div -> Concat -> Reshape chains) is
folded into initializers once the input shapes are static (engine.onnx_folding), and
operators the import cannot convert are replaced by their ONNX function bodies
(engine.onnx_functions); the model as given stays the reference onnxruntime verifies
against (`Model.reference`). A model older than opset 7 is upgraded first
(engine.onnx_upgrade): onnxruntime runs no older one.

Zoo models are the "light" model-zoo architectures shipped inside the onnx package. Their
weights are built by `ConstantOfShape` (every weight 0.02), which makes outputs
meaningless; they are replaced by seeded random initializers scaled by role (He for conv
and gemm weights, positive variances for batch norm) so numerical checks mean something.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Mapping

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from engine.calibrate import calibrate_batchnorm
from engine.errors import ModelLoadError, UnsupportedOpError, one_line
from engine.input_data import check_inputs, read_inputs
from engine.onnx_folding import fold_shape_arithmetic
from engine.onnx_functions import expand_functions
from engine.onnx_upgrade import OLDEST_OPSET, upgrade_opset

ZOO_PREFIX = "zoo:"
ZOO_DIR = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SAMPLE_DIR = Path(__file__).resolve().parent.parent / "sample_models"
# Values that random inputs never contain and some operators treat specially (IsInf, Div...).
SPECIAL_VALUES = (np.inf, -np.inf, np.nan, -0.0)
# Ops that only pass a weight through on the way to its real consumer.
_WEIGHT_PASSTHROUGH = {"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Cast", "Identity"}


@dataclass(frozen=True)
class InputSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # numpy dtype name

    def random(self, rng: np.random.Generator) -> np.ndarray:
        if np.issubdtype(np.dtype(self.dtype), np.floating):
            return rng.standard_normal(self.shape).astype(self.dtype)
        return rng.integers(0, 4, size=self.shape).astype(self.dtype)


@dataclass(frozen=True, eq=False)
class Model:
    """A validated ONNX model with static input shapes and shape-inferred value infos."""

    name: str
    source: str
    proto: onnx.ModelProto
    inputs: tuple[InputSpec, ...]
    outputs: tuple[str, ...]
    weights_replaced: int  # ConstantOfShape weights replaced by seeded random initializers
    folded_nodes: int = 0  # shape-arithmetic nodes folded into initializers
    # the model before folding and function expansion (None: neither changed it)
    unfolded: onnx.ModelProto | None = None
    upgraded_from: int | None = None  # the file's ai.onnx opset, when older than OLDEST_OPSET
    given: Mapping[str, np.ndarray] | None = None  # inputs from the user's file (engine.input_data)

    @property
    def upgraded_to(self) -> int | None:
        """The ai.onnx opset the model was upgraded to at load, or None."""
        return OLDEST_OPSET if self.upgraded_from is not None else None

    @property
    def reference(self) -> onnx.ModelProto:
        """What onnxruntime runs to check our outputs: the model as given, shape chains and all."""
        return self.unfolded if self.unfolded is not None else self.proto

    def random_inputs(self, seed: int = 0, specials: bool = False) -> dict[str, np.ndarray]:
        """Seeded random inputs. `specials`: the same inputs with inf, -inf, nan and -0.0
        mixed into every floating-point input (1 element in 16, at least one of each)."""
        rng = np.random.default_rng(seed)
        inputs = {spec.name: spec.random(rng) for spec in self.inputs}
        return _with_specials(inputs, rng) if specials else inputs

    def sample_inputs(self, seed: int = 0, second: bool = False, specials: bool = False) -> dict[str, np.ndarray]:
        """The inputs checks run on: the given ones (`given`), the rest seeded random.
        `second`: another input, to tell whether outputs move with it: the given integer and
        bool inputs (shapes, indices, masks) kept, everything else drawn with seed + 1.
        `specials`: with inf, -inf, nan and -0.0 mixed into the floating-point inputs."""
        given = dict(self.given or {})
        drawn = self.random_inputs(seed + 1 if second else seed)
        if second:
            given = {n: v for n, v in given.items() if not np.issubdtype(v.dtype, np.floating)}
        inputs = {name: given[name].copy() if name in given else value for name, value in drawn.items()}
        return _with_specials(inputs, np.random.default_rng(seed)) if specials else inputs


def _with_specials(inputs: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    for value in inputs.values():
        if np.issubdtype(value.dtype, np.floating) and value.size:
            flat = value.reshape(-1)
            where = rng.choice(flat.size, min(flat.size, max(len(SPECIAL_VALUES), flat.size // 16)), replace=False)
            flat[where] = np.resize(np.array(SPECIAL_VALUES, value.dtype), where.size)
    return inputs


def zoo_names() -> list[str]:
    """Names accepted after `zoo:`: the light model-zoo files inside the onnx package."""
    return sorted(p.stem.removeprefix("light_") for p in ZOO_DIR.glob("light_*.onnx"))


def _generated_samples() -> dict:
    from sample_models.build_samples import GENERATED  # seeded, written on first use

    return GENERATED


def names_a_model(spec: str) -> bool:
    """Whether `spec` could be a model: a path, a bundled or generated sample name, zoo:NAME."""
    if spec.startswith(ZOO_PREFIX) or Path(spec).exists() or Path(spec).suffix or "/" in spec:
        return True
    return (SAMPLE_DIR / f"{spec}.onnx").is_file() or spec in _generated_samples()


def resolve_path(spec: str) -> Path:
    """Map `zoo:NAME` or a path (or a bundled sample name) to a file on disk."""
    if spec.startswith(ZOO_PREFIX):
        name = spec[len(ZOO_PREFIX):]
        path = ZOO_DIR / f"light_{name}.onnx"
        if not path.is_file():
            raise ModelLoadError(f"unknown zoo model '{name}'; known: {', '.join(zoo_names())}")
        return path
    path = Path(spec)
    if not path.exists() and not path.suffix and (SAMPLE_DIR / f"{spec}.onnx").is_file():
        return SAMPLE_DIR / f"{spec}.onnx"
    if not path.exists() and not path.suffix and spec in _generated_samples():
        from sample_models.build_samples import build_generated

        return Path(build_generated(spec, str(SAMPLE_DIR)))
    if not path.exists():
        raise ModelLoadError(f"model file not found: {spec}")
    if not path.is_file():
        raise ModelLoadError(f"model path is not a file: {spec}")
    return path


def load_model(spec: str, shapes: Mapping[str, tuple[int, ...]] | None = None,
               seed: int = 0, inputs_from: str | None = None) -> Model:
    """Load, validate and normalise a model. Raises ModelLoadError / UnsupportedOpError.
    `inputs_from`: a file of inputs to check on (engine.input_data); their shapes fix the
    dynamic dimensions that `shapes` does not."""
    path = resolve_path(spec)
    proto = _parse(path)
    is_zoo = spec.startswith(ZOO_PREFIX)
    _drop_initializer_inputs(proto)
    replaced = _replace_constant_weights(proto, seed) if is_zoo else 0
    provided = read_inputs(inputs_from, [vi.name for vi in proto.graph.input]) if inputs_from else {}
    dynamic = {vi.name for vi in proto.graph.input
               if any(not d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)}
    shapes = {**{n: tuple(a.shape) for n, a in provided.items() if n in dynamic}, **(shapes or {})}
    _apply_shapes(proto, shapes, spec)
    _check(proto, spec)
    proto, upgraded_from = upgrade_opset(proto, spec)
    _readable_ir_version(proto)
    given = proto
    known = _known_ops()
    expansion = expand_functions(proto, known.__contains__)  # first: bodies have shape chains to fold
    proto = expansion.proto if expansion is not None else proto
    folding = fold_shape_arithmetic(proto)
    proto = folding.proto if folding is not None else proto
    unfolded = given if proto is not given else None
    _check_supported_ops(proto, known)
    proto = _infer_shapes(proto, spec)
    inputs = tuple(_input_spec(vi) for vi in proto.graph.input)
    check_inputs(provided, inputs, inputs_from)
    if replaced:
        rng = np.random.default_rng(seed)
        feeds = {spec.name: spec.random(rng) for spec in inputs}
        for calibrated in (proto, unfolded) if unfolded is not None else (proto,):  # the same statistics
            calibrate_batchnorm(calibrated, feeds)
    name = spec[len(ZOO_PREFIX):] if is_zoo else model_name(path)
    return Model(name=name, source=spec, proto=proto, inputs=inputs,
                 outputs=tuple(o.name for o in proto.graph.output), weights_replaced=replaced,
                 folded_nodes=folding.removed if folding is not None else 0, unfolded=unfolded,
                 upgraded_from=upgraded_from, given=provided or None)


def model_name(path: Path) -> str:
    """The file's stem, or its folder's name for a `model.onnx` (ONNX's test folders, Hugging
    Face exports): outputs go to out/NAME-TARGET, which one shared name would overwrite."""
    if path.stem == "model" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem


def _parse(path: Path) -> onnx.ModelProto:
    if os.path.getsize(path) == 0:
        raise ModelLoadError(f"{path}: empty file, not an ONNX model")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as err:
        raise ModelLoadError(f"{path}: not a valid ONNX file (truncated, corrupt or another "
                             f"format): {_first_line(err)}") from None
    _load_external_weights(proto, path)
    if not proto.HasField("graph") or len(proto.graph.node) == 0:
        raise ModelLoadError(f"{path}: not an ONNX model (no graph or no nodes)")
    return proto


def _load_external_weights(proto: onnx.ModelProto, path: Path) -> None:
    """Weights saved beside the model (`save_as_external_data`: models over 2 GB, most Hugging
    Face exports) read into it, from files named relative to the model's folder."""
    from onnx.external_data_helper import load_external_data_for_model, uses_external_data

    tensors = [t for t in _all_tensors(proto) if uses_external_data(t)]
    if not tensors:
        return
    for tensor in tensors:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        file = path.parent / location
        if not location or not file.is_file():
            raise ModelLoadError(f"{path}: the weights of '{tensor.name}' are in an external file "
                                 f"'{location}', which is not there (expected beside the model: {file})")
    try:
        load_external_data_for_model(proto, str(path.parent))
    except Exception as err:  # noqa: BLE001 - onnx raises several unrelated types here
        raise ModelLoadError(f"{path}: cannot read its external weights: {_first_line(err)}") from None


def _all_tensors(proto: onnx.ModelProto):
    """Every tensor of the model: initializers and tensor attributes, subgraphs included."""
    graphs = [proto.graph]
    while graphs:
        graph = graphs.pop()
        yield from graph.initializer
        for node in graph.node:
            for attr in node.attribute:
                if attr.HasField("t"):
                    yield attr.t
                yield from attr.tensors
                if attr.HasField("g"):
                    graphs.append(attr.g)
                graphs.extend(attr.graphs)


def _infer_shapes(proto: onnx.ModelProto, spec: str) -> onnx.ModelProto:
    """Strict shape inference; where strict mode fails but lenient inference still types
    every node output, the lenient result. onnx 1.23's own function bodies trip strict mode
    (MeanVarianceNormalization's Constant reads an attribute the node leaves at its
    default) although the op's output shape is known."""
    try:
        return shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    except Exception as err:  # onnx raises several unrelated types here
        strict_error = err
    try:
        lenient = shape_inference.infer_shapes(proto, check_type=True, strict_mode=False)
    except Exception:
        lenient = None
    if lenient is None or not _every_output_typed(lenient):
        raise ModelLoadError(f"{spec}: shape inference failed: {_first_line(strict_error)}") from None
    return lenient


def _every_output_typed(proto: onnx.ModelProto) -> bool:
    """Every node output has an element type and a shape (inferred or declared)."""
    typed = {vi.name: vi.type for vi in (*proto.graph.value_info, *proto.graph.output, *proto.graph.input)}
    for node in proto.graph.node:
        for name in filter(None, node.output):
            t = typed.get(name)
            if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.elem_type \
                    or not t.tensor_type.HasField("shape"):
                return False
    return True


def _check(proto: onnx.ModelProto, spec: str) -> None:
    try:
        onnx.checker.check_model(proto)
    except Exception as err:
        raise ModelLoadError(f"{spec}: invalid ONNX model: {_first_line(err)}") from None


def _readable_ir_version(proto: onnx.ModelProto) -> None:
    """An IR version newer than onnxruntime reads (this onnx saves 14, onnxruntime 1.31 reads
    13) is lowered to the newest it reads: onnxruntime folds shapes, calibrates and is the
    reference of every check, and an operator's meaning is its opset's, not the IR version's
    (a graph using a newer IR's feature fails there, in one line)."""
    version = proto.ir_version
    while version > 3 and not _reference_reads(version):
        version -= 1
    proto.ir_version = version


@lru_cache(maxsize=None)
def _reference_reads(ir_version: int) -> bool:
    """Whether onnxruntime opens a model of this IR version (it has no query for its maximum):
    an Identity model of that version, a few milliseconds."""
    from engine.runtime.measure import onnxruntime_session

    t = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [t],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=ir_version)
    try:
        onnxruntime_session(probe.SerializeToString(), threads=1)
    except Exception as err:
        return "IR version" not in str(err)
    return True


def reference_refusal(proto: onnx.ModelProto) -> str | None:
    """Why onnxruntime cannot be the reference of this model's checks (one line), or None:
    an ai.onnx opset newer than it supports (onnx 1.23 saves opset 28 as "under development";
    onnxruntime 1.31 supports up to 26). Its IR version was lowered at load."""
    version = next((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), None)
    if version is None or _reference_opens(version):
        return None
    import onnxruntime

    newest = next((v for v in range(version - 1, 0, -1) if _reference_opens(v)), None)
    return (f"onnxruntime {onnxruntime.__version__}, the reference every compile is checked against, "
            f"does not support ai.onnx opset {version} (newest: {newest}): export the model with "
            f"opset {newest} or lower")


@lru_cache(maxsize=None)
def _reference_opens(opset: int) -> bool:
    """Whether onnxruntime opens an Identity model of this ai.onnx opset (no query either)."""
    from engine.runtime.measure import onnxruntime_session

    ir_version = next(v for v in range(onnx.IR_VERSION, 3, -1) if _reference_reads(v))
    t = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "probe", [t],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])])
    probe = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version)
    try:
        onnxruntime_session(probe.SerializeToString(), threads=1)
    except Exception:  # noqa: BLE001 - any refusal means no
        return False
    return True


def _known_ops() -> frozenset[str]:
    """ONNX operators the import converts: TVM's frontend's and ours."""
    from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

    from engine.converters import CONVERTERS

    return frozenset(_get_convert_map()) | frozenset(CONVERTERS) | {"Constant", "If"}


def _check_supported_ops(proto: onnx.ModelProto, known: frozenset[str]) -> None:
    missing: dict[str, str] = {}
    for node in proto.graph.node:
        if node.op_type not in known and node.op_type not in missing:
            missing[node.op_type] = node.name or node.output[0]
    if missing:
        listed = ", ".join(f"{op} (node '{name}')" for op, name in missing.items())
        raise UnsupportedOpError(f"unsupported op for the TVM ONNX frontend: {listed}")


def _drop_initializer_inputs(proto: onnx.ModelProto) -> None:
    """Inputs that also have an initializer are weights, not data (old ONNX style)."""
    inits = {i.name for i in proto.graph.initializer}
    data = [vi for vi in proto.graph.input if vi.name not in inits]
    if len(data) == len(proto.graph.input):
        return
    del proto.graph.input[:]
    proto.graph.input.extend(data)
    # IR < 4 demands every initializer be a graph input; 4 lifts that, same semantics.
    proto.ir_version = max(proto.ir_version, 4)


def _apply_shapes(proto: onnx.ModelProto, shapes: dict[str, tuple[int, ...]], spec: str) -> None:
    names = {vi.name for vi in proto.graph.input}
    for name in shapes:
        if name not in names:
            raise ModelLoadError(f"--shape names unknown input '{name}'; inputs: {', '.join(sorted(names))}")
    if shapes:  # stored intermediate shapes were inferred for the old input shapes
        del proto.graph.value_info[:]
        for out in proto.graph.output:
            for k, dim in enumerate(out.type.tensor_type.shape.dim):
                dim.Clear()
                dim.dim_param = f"{out.name}_d{k}"  # symbolic: inference fills it in
    for vi in proto.graph.input:
        kind = vi.type.WhichOneof("value")
        if kind == "optional_type" and vi.type.optional_type.elem_type.WhichOneof("value") == "tensor_type":
            # an optional tensor is compiled as present (as TVM's frontend does): the caller passes a tensor
            vi.type.CopyFrom(vi.type.optional_type.elem_type)
            kind = "tensor_type"
        if kind != "tensor_type":  # sequence, map, optional sequence: no --shape makes them tensors
            raise ModelLoadError(f"{spec}: input '{vi.name}' is a{_KINDS.get(kind, ' ' + str(kind))}, "
                                 "not a tensor: only tensor inputs are supported")
        dims = vi.type.tensor_type.shape.dim
        if vi.name in shapes:
            new = shapes[vi.name]
            if len(new) != len(dims):
                raise ModelLoadError(f"--shape {vi.name}: rank {len(new)} given, model input has rank {len(dims)}")
            for dim, value in zip(dims, new):
                dim.Clear()
                dim.dim_value = int(value)
        # dim_value 0 is a static empty dimension (CastLike's `like` is often one)
        dynamic = [d.dim_param or "?" for d in dims if not d.HasField("dim_value") or d.dim_value < 0]
        if dynamic or not vi.type.tensor_type.HasField("shape"):
            # the static dims as they are, 1 for each dynamic one: a shape the model takes
            example = ",".join(str(d.dim_value) if d.HasField("dim_value") and d.dim_value > 0 else "1"
                               for d in dims) or "1"
            raise ModelLoadError(f"{spec}: input '{vi.name}' has dynamic dimensions {dynamic}; "
                                 f"give a static shape with --shape {vi.name}={example}")


_KINDS = {"sequence_type": " sequence", "optional_type": "n optional", "map_type": " map",
          "sparse_tensor_type": " sparse tensor", None: " value of no type"}


def _input_spec(vi: onnx.ValueInfoProto) -> InputSpec:
    tt = vi.type.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type).name
    return InputSpec(vi.name, tuple(d.dim_value for d in tt.shape.dim), dtype)


def _replace_constant_weights(proto: onnx.ModelProto, seed: int) -> int:
    """Replace ConstantOfShape nodes with a constant shape by random initializers."""
    inits = {i.name: i for i in proto.graph.initializer}
    consumers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in proto.graph.node:
        for k, name in enumerate(node.input):
            consumers.setdefault(name, []).append((node, k))
    rng = np.random.default_rng(seed)
    keep, replaced = [], 0
    for node in proto.graph.node:
        if node.op_type != "ConstantOfShape" or node.input[0] not in inits:
            keep.append(node)
            continue
        shape = tuple(int(v) for v in numpy_helper.to_array(inits[node.input[0]]).ravel())
        value = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "value"), None)
        dtype = numpy_helper.to_array(value).dtype if value is not None else np.dtype("float32")
        user, slot = _weight_role(node.output[0], consumers)
        array = _random_weight(rng, shape, user, slot).astype(dtype)
        proto.graph.initializer.append(numpy_helper.from_array(array, node.output[0]))
        replaced += 1
    del proto.graph.node[:]
    proto.graph.node.extend(keep)
    used = {name for node in keep for name in node.input} | {o.name for o in proto.graph.output}
    live = [i for i in proto.graph.initializer if i.name in used]
    del proto.graph.initializer[:]
    proto.graph.initializer.extend(live)
    return replaced


def _weight_role(name: str, consumers: dict) -> tuple[onnx.NodeProto | None, int]:
    """The node and input slot that finally consume a weight, looking through reshapes."""
    for _ in range(8):
        uses = consumers.get(name, [])
        if not uses:
            return None, 0
        node, slot = uses[0]
        if node.op_type not in _WEIGHT_PASSTHROUGH:
            return node, slot
        name = node.output[0]
    return None, 0


def _fan_in(shape: tuple[int, ...], user: onnx.NodeProto) -> int:
    if user.op_type.startswith("Conv"):
        return int(np.prod(shape[1:]))
    trans_b = any(a.name == "transB" and a.i for a in user.attribute)
    return shape[-1] if trans_b else shape[0]


def _random_weight(rng: np.random.Generator, shape: tuple[int, ...],
                   user: onnx.NodeProto | None, slot: int) -> np.ndarray:
    op = user.op_type if user is not None else ""
    if slot == 1 and op in ("Conv", "ConvTranspose", "Gemm", "MatMul") and len(shape) >= 2:
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(np.sqrt(2.0 / max(_fan_in(shape, user), 1)))
    if op == "BatchNormalization" and slot in (1, 4) or op == "Mul":
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)  # scales, variances stay positive
    return rng.standard_normal(shape, dtype=np.float32) * np.float32(0.1)


def _first_line(err: BaseException) -> str:
    return one_line(err, 300)
