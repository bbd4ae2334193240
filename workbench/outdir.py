"""The output folder of a run: checked before any work, locked for the run, and cleared of
an earlier run's outputs so a folder never mixes two runs. A folder the run created and
left with nothing in it (the run failed) is removed at exit."""

from __future__ import annotations

import atexit
import fcntl
import os
from pathlib import Path

from engine.errors import BlockwiseError

# What a compile writes; report.json goes last and first goes away (its presence means
# a finished run).
OUTPUTS = ("report.json", "model.so", "timing.svg", "timing.png")
LOCK = ".workbench.lock"


class OutDirError(BlockwiseError):
    """The output folder cannot be used."""


def claim_out_dir(path: str | os.PathLike) -> Path:
    """Create `path` if needed, check it is a writable folder, take its lock (held until the
    process exits) and remove an earlier run's outputs. One-line errors, before any work."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise OutDirError(f"--out {path}: exists and is not a folder")
    created = not path.exists()
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise OutDirError(f"--out {path}: cannot write there ({err.strerror or err})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise OutDirError(f"--out {path}: another workbench run is writing this folder") from None
    _HELD.append(fd)
    if created:
        _CREATED.append(path)
    for name in OUTPUTS:
        try:
            (path / name).unlink(missing_ok=True)
        except OSError as err:
            raise OutDirError(f"--out {path}: cannot replace {name} ({err.strerror or err})") from None
    return path


_HELD: list[int] = []  # lock file descriptors, released when the process exits
_CREATED: list[Path] = []  # folders this process made


@atexit.register
def _remove_unused() -> None:
    """A folder this run made that holds only its lock: the run wrote nothing."""
    for path in _CREATED:
        try:
            if [p.name for p in path.iterdir()] == [LOCK]:
                (path / LOCK).unlink()
                path.rmdir()
        except OSError:
            pass
