"""What an accelerator is: the systolic array, its memories, its energy table and its extensions.

This is the simulator core's input vocabulary, shared with the API and the CLI, so it depends on
nothing but pydantic. Every field is a design-space dimension a user may sweep.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Dataflow = Literal["os", "ws", "is"]
# How a convolution's windowed operands cross the DRAM interface (worker.sim.conv_traffic):
# "im2col" moves the im2col matrices (SCALE-Sim's convention: every window copied), "tensor"
# moves the real feature maps row by row and forms the windows on chip.
ConvOperandTraffic = Literal["im2col", "tensor"]


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class EnergyTable(_Spec):
    """Energy per access or operation in picojoules, for one 32-bit word.

    Defaults: Horowitz, ISSCC 2014, 45 nm. A MAC is one FP multiply plus one FP add.
    """

    mac_mult: float = Field(3.7, ge=0, description="pJ per FP32 multiply in a PE")
    mac_add: float = Field(0.9, ge=0, description="pJ per FP32 add in a PE")
    register_file: float = Field(1.0, ge=0, description="pJ per 32-bit register-file access")
    sram: float = Field(5.0, ge=0, description="pJ per 32-bit SRAM access (8 KB bank)")
    dram: float = Field(640.0, ge=0, description="pJ per 32-bit DRAM access")
    int_add: float = Field(0.1, ge=0, description="pJ per 32-bit integer add or compare")
    int_mult: float = Field(3.1, ge=0, description="pJ per 32-bit integer multiply")


class MercuryHardware(_Spec):
    """The MCACHE that stores signatures with their computed results."""

    enabled: bool = Field(True, description="whether the accelerator has an MCACHE")
    mcache_entries: int = Field(1024, ge=1, le=1 << 20, description="MCACHE entries")
    mcache_ways: int = Field(4, ge=1, le=64, description="MCACHE associativity (1 = direct-mapped)")
    lookup_latency: int = Field(1, ge=0, le=64, description="cycles per signature lookup")
    lookups_per_cycle: int = Field(1, ge=1, le=1024, description="lookup ports of the MCACHE")


class ZeroSkipping(_Spec):
    """A sparsity-aware dataflow that skips MACs whose streamed operand is zero."""

    enabled: bool = Field(True, description="whether PEs skip zero operands")


class GradientPredictorUnit(_Spec):
    """The ADA-GP extension: a small unit that runs the gradient predictors."""

    enabled: bool = Field(True, description="whether the accelerator has a predictor unit")
    macs_per_cycle: int = Field(256, ge=1, le=1 << 20, description="predictor unit throughput")


StorageFormat = Literal["dense", "bitmap", "compressed"]


class OperandStorage(_Spec):
    """How each kind of tensor is stored in SRAM and DRAM, so traffic follows its density.

    Words per element of a tensor with non-zero fraction d, for w = 8 * word_bytes bits a word:
    dense 1; bitmap d + 1 / w (the non-zero values plus one presence bit per element);
    compressed d * (1 + index_bits / w) (each non-zero value with its index).
    Kinds, by GEMM operand (worker.sim.lowering): activations = FWD A and C, BWD-WEIGHT B;
    gradients = BWD-DATA and BWD-WEIGHT A and C; weights = FWD and BWD-DATA B.
    """

    activations: StorageFormat = Field("dense", description="inputs and outputs of layers")
    gradients: StorageFormat = Field("dense", description="output, input and weight gradients")
    weights: StorageFormat = Field("dense", description="layer weights")
    index_bits: int = Field(
        16, ge=1, le=64, description="bits of the index stored with each non-zero (compressed)"
    )


class AcceleratorConfig(_Spec):
    """One accelerator design point."""

    name: str = Field(
        "custom", min_length=1, max_length=64, description="label for tables and charts"
    )
    rows: int = Field(32, ge=1, le=1024, description="systolic array rows (PEs)")
    cols: int = Field(32, ge=1, le=1024, description="systolic array columns (PEs)")
    dataflow: Dataflow = Field("os", description="output-, weight- or input-stationary")
    ifmap_sram_kib: int = Field(64, ge=1, le=1 << 20, description="input-operand SRAM in KiB")
    filter_sram_kib: int = Field(64, ge=1, le=1 << 20, description="weight-operand SRAM in KiB")
    ofmap_sram_kib: int = Field(64, ge=1, le=1 << 20, description="output SRAM in KiB")
    dram_bandwidth: float = Field(
        8.0, gt=0, le=1 << 16, description="DRAM bandwidth in words per cycle"
    )
    word_bytes: int = Field(4, ge=1, le=8, description="bytes per operand word")
    conv_operand_traffic: ConvOperandTraffic = Field(
        "im2col",
        description="convolution operands moved as im2col matrices (SCALE-Sim) or as the real "
        "feature maps with windows formed on chip",
    )
    clock_mhz: float = Field(500.0, gt=0, le=10_000, description="clock frequency in MHz")
    storage: OperandStorage = Field(default_factory=OperandStorage)
    energy: EnergyTable = Field(default_factory=EnergyTable)
    mercury: MercuryHardware = Field(default_factory=MercuryHardware)
    zero_skipping: ZeroSkipping = Field(default_factory=ZeroSkipping)
    gradient_predictor: GradientPredictorUnit = Field(default_factory=GradientPredictorUnit)


# Every preset forms convolution windows on chip (conv_operand_traffic="tensor"):
# - edge: a small edge NPU keeps input rows in its convolution buffer and generates windows from
#   there (NVDLA's CBUF is the public example); copying every window over a 4-word/cycle DRAM
#   link would make it im2col-bound, which no such design accepts.
# - eyeriss-like: row stationary; ifmap rows are multicast to the PE diagonals, each input row is
#   read once per pass over the filters it meets.
# - tpu-like: the data set-up unit builds the array's input windows from the unified buffer;
#   DRAM holds the real activations.
PRESETS: dict[str, AcceleratorConfig] = {
    "edge": AcceleratorConfig(
        name="edge",
        rows=16,
        cols=16,
        dataflow="os",
        ifmap_sram_kib=32,
        filter_sram_kib=32,
        ofmap_sram_kib=16,
        dram_bandwidth=4.0,
        clock_mhz=200.0,
        conv_operand_traffic="tensor",
    ),
    "tpu-like": AcceleratorConfig(
        name="tpu-like",
        rows=128,
        cols=128,
        dataflow="ws",
        ifmap_sram_kib=6144,
        filter_sram_kib=6144,
        ofmap_sram_kib=2048,
        dram_bandwidth=32.0,
        clock_mhz=700.0,
        conv_operand_traffic="tensor",
    ),
    "eyeriss-like": AcceleratorConfig(
        name="eyeriss-like",
        rows=12,
        cols=14,
        dataflow="os",
        ifmap_sram_kib=108,
        filter_sram_kib=108,
        ofmap_sram_kib=108,
        dram_bandwidth=4.0,
        clock_mhz=200.0,
        conv_operand_traffic="tensor",
    ),
}
