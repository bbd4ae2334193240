"""Inputs a person gives to check a compile on (`workbench compile --inputs FILE`).

Random inputs cannot be right for every model: a runtime shape (Expand's), token ids below a
vocabulary, a mask, an index. A file of real inputs fixes those; any input it lacks is drawn
at random. Read from a `.npz` (arrays by input name), an ONNX test-data folder
(`test_data_set_0/input_0.pb`, ...: tensors by their name, else by position) or one
`.pb` tensor.

    >>> read_inputs("test_data_set_0", ["x", "shape"])   # {"x": array(...), "shape": array([3, 4])}
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from engine.errors import ModelLoadError, one_line


def read_inputs(path: str | Path, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays of `path` by model input name (`names`: the model's inputs, in order)."""
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"--inputs {path}: no such file or folder")
    try:
        if path.is_dir():
            files = sorted(path.glob("input_*.pb"), key=_position)
            if not files:
                raise ModelLoadError(f"--inputs {path}: no input_N.pb files in this folder")
            return _by_name([_tensor(f) for f in files], names, path)
        if path.suffix == ".pb":
            return _by_name([_tensor(path)], names, path)
        data = np.load(path, allow_pickle=False)
        if isinstance(data, np.ndarray):
            raise ModelLoadError(f"--inputs {path}: one unnamed array (.npy): save a .npz by input name, "
                                 "np.savez(FILE, NAME=array, ...)")
        with data:
            return {key: np.asarray(data[key]) for key in data.files}
    except ModelLoadError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise ModelLoadError(f"--inputs {path}: not a .npz of arrays, an input_N.pb folder or a .pb tensor: "
                             f"{one_line(err)}") from None


def check_inputs(given: dict[str, np.ndarray], specs, path: str | Path) -> dict[str, np.ndarray]:
    """`given` against the model's inputs (InputSpec: name, static shape, dtype): each named
    input exists and has the model's shape and dtype."""
    by_name = {s.name: s for s in specs}
    unknown = [n for n in given if n not in by_name]
    if unknown:
        raise ModelLoadError(f"--inputs {path}: {', '.join(map(repr, unknown))} not an input of the model "
                             f"(its inputs: {', '.join(by_name)})")
    for name, value in given.items():
        spec = by_name[name]
        if tuple(value.shape) != tuple(spec.shape):
            raise ModelLoadError(f"--inputs {path}: '{name}' has shape {tuple(value.shape)}, the model's input "
                                 f"{tuple(spec.shape)}")
        if value.dtype != np.dtype(spec.dtype):
            raise ModelLoadError(f"--inputs {path}: '{name}' is {value.dtype}, the model's input {spec.dtype}")
    return given


def _position(file: Path) -> int:
    try:
        return int(file.stem.split("_", 1)[1])
    except (IndexError, ValueError):
        raise ModelLoadError(f"--inputs {file.parent}: '{file.name}' is not named input_N.pb") from None


def _tensor(file: Path) -> tuple[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    try:
        tensor = onnx.load_tensor(str(file))
        return tensor.name, numpy_helper.to_array(tensor)
    except Exception as err:  # noqa: BLE001 - protobuf raises its own types
        raise ModelLoadError(f"--inputs {file}: not an ONNX tensor file: {one_line(err)}") from None


def _by_name(tensors: list[tuple[str, np.ndarray]], names: list[str], path: Path) -> dict[str, np.ndarray]:
    """Named tensors by their names when all have one the model knows, else by position."""
    if all(name in names for name, _ in tensors):
        return {name: value for name, value in tensors}
    if len(tensors) > len(names):
        raise ModelLoadError(f"--inputs {path}: {len(tensors)} tensors, the model has {len(names)} inputs")
    return {name: value for name, (_, value) in zip(names, tensors)}
