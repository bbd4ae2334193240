"""Output files: written atomically so an interrupted run never leaves half a file.

Every temporary file lives in `LIVE_TEMPS` until it is renamed into place or removed, so an
interrupt handler can remove what a killed run left (`remove_live_temps`)."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from pathlib import Path


LIVE_TEMPS: set[str] = set()  # temp files not yet renamed into place


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: int = 0o666):
    """Yield a temp path beside `path` (same suffix); on success it is renamed to `path`
    (readers never see a half-written file), on failure or interrupt it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    LIVE_TEMPS.add(tmp)
    try:
        yield tmp
        os.chmod(tmp, mode & ~current_umask())  # mkstemp makes 0600; outputs are ordinary files
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        LIVE_TEMPS.discard(tmp)


def write_atomic(path: str | os.PathLike, data: bytes | str) -> Path:
    """Write a file so that readers never see it half-written (temp file + rename)."""
    raw = data.encode() if isinstance(data, str) else data
    with atomic_output(path) as tmp:
        Path(tmp).write_bytes(raw)
    return Path(path)


def remove_live_temps() -> None:
    """Remove the temp files of writes in progress (for an interrupt handler)."""
    for tmp in list(LIVE_TEMPS):
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def native_stderr_silenced():
    """Silence C++ log lines (TVM's export warns once per kernel) for a block."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


class NativeLog:
    """Keeps what native code writes to fd 2 (TVM's C++ warnings, such as "Fast mode
    segfaults when there are out-of-bounds indices") instead of letting it reach the
    terminal; Python's own sys.stderr still does. For command-line runs, not the TUI
    (which draws on the terminal through the same descriptor).

        with NativeLog() as log:
            ...
        report["tvm_log"] = log.lines()
    """

    def __enter__(self) -> "NativeLog":
        sys.stderr.flush()
        self._file = tempfile.TemporaryFile()
        self._saved = os.dup(2)
        self._python_stderr = sys.stderr
        sys.stderr = os.fdopen(os.dup(self._saved), "w", buffering=1)
        os.dup2(self._file.fileno(), 2)
        return self

    def lines(self) -> list[str]:
        """The distinct lines so far, in order, without their timestamps."""
        if self._file.closed:
            return self._kept
        os.lseek(self._file.fileno(), 0, os.SEEK_SET)
        text = b"".join(iter(lambda: os.read(self._file.fileno(), 1 << 16), b"")).decode(errors="replace")
        stamp = re.compile(r"^\[\d\d:\d\d:\d\d\] ")
        return list(dict.fromkeys(stamp.sub("", line.strip()) for line in text.splitlines() if line.strip()))

    def __exit__(self, *exc) -> None:
        sys.stderr.flush()
        sys.stderr.close()
        sys.stderr = self._python_stderr
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._kept = self.lines()
        self._file.close()
