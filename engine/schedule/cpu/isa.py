"""The vector facts of a CPU target that the default schedules size their tiles from.

TVM's `llvm_get_vector_width` answers 512 for any x86 `-mcpu` on an AVX-512 host
(haswell and znver1 included), so tiles sized from it spill on AVX2 machines. The vector
width and register count are read from the target's own features instead.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm.target import Target
from tvm.target.codegen import llvm_get_system_cpu, target_has_features


@dataclass(frozen=True)
class Isa:
    name: str
    vector_bits: int
    vector_registers: int
    # Write a conv's register tile (output columns x channel vectors) back to NCHW as rows
    # of output columns (the tile transposed in registers) rather than as channel vectors
    # (one scattered store per lane, each into another channel plane). AVX-512, measured on a
    # 2-core Xeon: resnet50 0.94x, squeezenet 0.90-0.95x, shufflenet 0.985x end to end;
    # AVX2 code (--arch haswell on the same Xeon): resnet50 1.03-1.07x, so not there.
    row_writeback: bool = False
    # Run stride-1 depthwise convs along output rows (engine.schedule.cpu.depthwise_rows,
    # the default where set) instead of on a channel-repacked input. Per kernel on a 2-core
    # Zen 5 EPYC: AVX-512 56-wide 0.57-0.59x, 28-wide 0.79-0.85x, 14-wide 0.86x; AVX2 code
    # (--arch haswell), a channel plane per task: 28-wide 0.76-0.86x, 14-wide 0.83-0.85x,
    # 7-wide 0.96-1.05x (as row tiles after a padding pass it had run 14-wide 1.57x slower).
    depthwise_rows: bool = False
    # From this many output columns per register tile, a conv with a window (3x3, ...)
    # reduces over the input channels innermost, its taps outside (None: never). With the
    # taps innermost LLVM unrolls them and keeps each broadcast input column for the next
    # tap; without a broadcast operand (AVX2) those columns spill to the stack past ~10.
    # Per kernel, AVX2 code (--arch haswell) on a 2-core Zen 5 EPYC: squeezenet's 13-wide
    # 3x3 convs 0.69-0.70x, 55-wide (11-column tiles) 0.86x; 9-column tiles 1.04x and
    # 7-column 1.03-1.11x slower (resnet50, inception_v2), so not there. AVX-512 13-wide:
    # 1.23x slower (484 -> 393 GFLOP/s), so never.
    taps_outside_from: int | None = None
    # An FMA can take a memory operand broadcast to every lane (AVX-512's {1toN}, NEON's
    # by-element FMA). Without one, each broadcast input column is a load into a register of
    # its own, so a register tile's operand loads per FMA count (engine.schedule.cpu.conv).
    broadcast_operand: bool = False

    def lanes(self, dtype_bits: int = 32) -> int:
        return max(self.vector_bits // dtype_bits, 1)

    def max_rows(self, operand_vectors: int) -> int:
        """How many rows of `operand_vectors` accumulator vectors a register tile may hold:
        the accumulators, the operand vectors one reduction step loads and two broadcasts
        (AVX2 has no broadcast operand: it is a register, and the next one loads meanwhile)
        fit the register file, and there are at most 18 accumulators (past which a longer
        tile gained nothing measurable on AVX-512 and divides fewer output widths). AVX2:
        13 rows of one vector (squeezenet's 13-wide maps in one tile), 6 of two."""
        fit = (self.vector_registers - operand_vectors - 2) // operand_vectors
        return max(1, min(fit, MAX_ACCUMULATORS // operand_vectors))


MAX_ACCUMULATORS = 18
# Independent accumulators that hide the FMA latency (4-5 cycles) on two FMA ports.
MIN_ACCUMULATORS = 8

AVX512 = Isa("avx512", 512, 32, row_writeback=True, depthwise_rows=True, broadcast_operand=True)
AVX2 = Isa("avx2", 256, 16, depthwise_rows=True, taps_outside_from=11)
SSE = Isa("sse", 128, 16)
NEON = Isa("neon", 128, 32, broadcast_operand=True)


def isa_of(target: Target | None) -> Isa:
    """The vector ISA the llvm `target` compiles for (None: this host's CPU); SSE when its
    features cannot be read."""
    if target is None:
        target = Target({"kind": "llvm", "mcpu": llvm_get_system_cpu()})

    def has(feature: str) -> bool:
        try:
            return bool(target_has_features(feature, target))
        except Exception:  # pylint: disable=broad-except  # a feature the target's arch lacks
            return False

    if has("avx512f"):
        return AVX512
    if has("avx2") or has("avx"):
        return AVX2
    if has("neon") or bool(target.attrs.get("feature.has_asimd", False)):
        return NEON
    return SSE
