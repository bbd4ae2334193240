"""Run the peers' AVX2 kernels on an AVX-512 machine: `bench/compare.py --peer-isa avx2`.

onnxruntime (MLAS) picks its kernels from CPUID when it loads. With --peer-isa avx2 the
benchmark re-executes itself with bench/hide_avx512.c preloaded: CPUID then reports no
AVX-512 to the process, so onnxruntime runs its AVX2 kernels, and with `--arch haswell`
our builds are AVX2 code too. The comparison is AVX2 against AVX2 on this machine's cores
(an AVX-512 core running AVX2 code, not an AVX2-only CPU: its caches, clocks and latencies
stay this machine's).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "hide_avx512.c"
MARK = "BLOCKWISE_PEER_ISA"
CPUINFO = Path("/proc/cpuinfo")
CHOICES = ("native", "avx2")


class PeerIsaError(Exception):
    """Why the peers cannot be restricted to the ISA asked for (one line)."""


def _avx512_visible() -> bool:
    from numpy._core._multiarray_umath import __cpu_features__ as features

    return bool(features.get("AVX512F"))


def _shim() -> Path:
    """The compiled shim, built once per source version into the temp folder."""
    text = SOURCE.read_bytes()
    out = Path(tempfile.gettempdir()) / f"blockwise-hide_avx512-{hashlib.sha256(text).hexdigest()[:12]}.so"
    if out.exists():
        return out
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise PeerIsaError("--peer-isa avx2 needs a C compiler (cc) to build bench/hide_avx512.c")
    tmp = out.with_suffix(f".{os.getpid()}.tmp")
    done = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", str(tmp), str(SOURCE)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = (done.stderr.strip().splitlines() or ["no output"])[0]
        raise PeerIsaError(f"building bench/hide_avx512.c failed: {first}")
    tmp.replace(out)
    return out


def ensure(isa: str, argv: list[str]) -> None:
    """Return when the process's peers run `isa` kernels; else re-execute the benchmark with
    the shim preloaded (this call does not return then). PeerIsaError when it cannot."""
    if isa == "native":
        return
    if isa != "avx2":
        raise PeerIsaError(f"unknown --peer-isa {isa!r} (choose from {', '.join(CHOICES)})")
    if os.environ.get(MARK) == isa:  # the re-executed process
        if _avx512_visible():
            raise PeerIsaError("--peer-isa avx2: CPUID still reports AVX-512 with the shim preloaded")
        return
    if not sys.platform.startswith("linux"):
        raise PeerIsaError("--peer-isa avx2 works on Linux only (it traps CPUID)")
    if not _avx512_visible():
        return  # an AVX2 machine: the peers run AVX2 kernels already
    if not CPUINFO.exists() or "cpuid_fault" not in CPUINFO.read_text():
        raise PeerIsaError("--peer-isa avx2: this CPU (or its hypervisor) has no CPUID faulting "
                           "(cpuid_fault in /proc/cpuinfo), so AVX-512 cannot be hidden")
    shim = _shim()
    env = dict(os.environ, **{MARK: isa})
    env["LD_PRELOAD"] = " ".join(x for x in (str(shim), os.environ.get("LD_PRELOAD", "")) if x)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *argv], env)
