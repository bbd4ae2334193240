"""Output files: atomic, and ordinary permissions (the temp file's 0600 does not leak)."""

import os
import stat

from engine.files import write_atomic


def test_write_atomic_respects_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_atomic(tmp_path / "sub" / "report.json", "{}\n")
    finally:
        os.umask(old)
    assert path.read_text() == "{}\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temp file left
