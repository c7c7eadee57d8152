"""What an accelerator is: the PE array, its memories, its energy and area tables and its
extensions.

This is the simulator core's input vocabulary, shared with the API and the CLI, so it depends on
nothing but pydantic. Every field is a design-space dimension a user may sweep. A field declares
with it (`Hardware`, as Annotated metadata) its unit, whether a hardware design search may sweep
it and whether the area model reads it; the search fields, the simulator's and the area model's
inputs and the units the design-space page shows all derive from those declarations (README:
"Adding an accelerator field").

An accelerator's extensions (`mcache`, `zero_skipping`, `gradient_predictor`: its fields of
type `HardwareExtension`) say what hardware it offers. The simulator takes a config literally and
its result lists the extensions that were on; an experiment's run switches on only those its
techniques use (`with_extensions`; which technique uses which is the technique table's,
backend/specs/techniques.py), so a baseline runs on the plain array. The presets below offer
their extensions the same way.

Storage formats belong to the zero-skipping hardware. A bitmap or compressed format only pays
with sparse data, and the hardware that encodes, decodes and skips it is the sparse dataflow's
(SparseTrain stores sparse data compressed on its own accelerator; its baseline is a dense
accelerator). So `with_extensions` leaves `storage`'s formats as given only where zero-skipping
stays on; where it is off (a 'dense' baseline, and every run whose techniques do not use
zero-skipping) the accelerator stores every kind of tensor dense. A config given straight to the
simulator (backend.sim, `python -m backend.sim`) is still taken literally, whatever its formats.

Presets (PRESETS): edge, tpu-like and eyeriss-like are generic arrays that offer every extension
(a run switches on those its techniques use). Each paper's accelerator offers only its own.
The full papers were not available: "paper" marks what their abstracts and summaries state,
"assumed" a choice made here (a documented default a user may sweep), never tuned to reach a
paper's number.

sparsetrain-like (SparseTrain, DAC 2020):
  paper: a 1-D convolution dataflow (rows of inputs against rows of kernels) that skips the zeros
    of ReLU/pooling outputs in FWD and of the stochastically pruned activation gradients in
    BWD-DATA and BWD-WEIGHT; sparse data is stored compressed; 14 nm; the baseline is a dense
    accelerator (dense arithmetic and dense storage: `with_extensions` without zero-skipping).
  assumed: the PE mapping of backend.sim.row_dataflow (kernel rows down the PE rows, output rows
    across the columns, channels folded over time); a 16 x 16 array; 64/64/64 KiB SRAMs; 8 words
    per cycle of DRAM bandwidth; 500 MHz; the default (45 nm) energy table; pruning arithmetic
    on one unit per PE column, overlapped with the array; activations and gradients
    compressed with 16-bit indices, falling back to dense per tensor where that is smaller.
mercury-like (MERCURY, HPCA 2023):
  paper: a systolic-array accelerator with an MCACHE that holds signatures and results; the
    signature (random projection) is computed with the pattern of a convolution, on the same
    dataflow.
  assumed: a 32 x 32 output-stationary array; one MCACHE lookup port per PE row
    (lookups_per_cycle 0) with a 1-cycle lookup latency; the projection on the array
    (projection_macs_per_cycle 0), fed by the FWD input stream; 64/64/64 KiB SRAMs; 8 words per
    cycle; 500 MHz. The MCACHE's entries and ways are the training's (MercuryParams).
adagp-like (ADA-GP, MICRO 2023):
  paper: a systolic-array accelerator with a hardware extension that runs the gradient
    predictors.
  assumed: a 32 x 32 output-stationary array; a predictor unit of 256 MACs per cycle with its
    operands in on-chip SRAM; 64/64/64 KiB SRAMs; 8 words per cycle; 500 MHz.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from operator import attrgetter
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetJsonSchemaHandler, model_validator
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from backend.specs.titles import field_title

# os/ws/is: systolic GEMM dataflows (backend.sim.systolic); row: SparseTrain-style 1-D convolution
# dataflow (backend.sim.row_dataflow).
Dataflow = Literal["os", "ws", "is", "row"]
ExtensionOverlap = Literal["overlapped", "serial"]
# How a convolution's windowed operands cross the DRAM interface (backend.sim.conv_traffic):
# "im2col" moves the im2col matrices (SCALE-Sim's convention: every window copied), "tensor"
# moves the real feature maps row by row and forms the windows on chip.
ConvOperandTraffic = Literal["im2col", "tensor"]


# Plausible ranges of the physical quantities. They keep every figure the simulator derives
# finite and meaningful: a clock of 5e-324 MHz passes "greater than zero" but makes the simulated
# time infinite, which no database stores. Each bound is far outside any real design, so no
# design-space sweep meets it.
MAX_PJ = 100_000.0
_PJ = "; 0 to 100,000 pJ (100 nJ, 150x a 45 nm DRAM access): beyond that it is not an access"
_SRAM = "; 1 KiB to 1 GiB (beyond any on-chip memory)"
MIN_CLOCK_MHZ, MAX_CLOCK_MHZ = 1.0, 10_000.0
MIN_DRAM_WORDS_PER_CYCLE, MAX_DRAM_WORDS_PER_CYCLE = 0.001, float(1 << 16)


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, field_title_generator=field_title)


@dataclass(frozen=True)
class Hardware:
    """What the design tools know of an accelerator field, declared with it
    (`rows: Annotated[int, Hardware(unit="PEs", searchable=True, area=True)] = Field(...)`):

    - unit: the unit of its values, shown beside them; the JSON schema carries it as "unit"
      (the design-space page reads it there);
    - searchable: a design search may sweep it (backend/specs/design_search.py: SEARCH_FIELDS);
      an int field takes whole values, a Literal field is a choice among its values;
    - area: the area model reads it (backend/sim/area.py: AREA_FIELDS).

    Every number and flag of an accelerator, declared so or not, reaches the simulator
    (backend/sim/simulate.py: CONFIG_FIELDS).
    """

    unit: str | None = None
    searchable: bool = False
    area: bool = False

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        if self.unit is not None:
            schema["unit"] = self.unit
        return schema


class EnergyTable(_Spec):
    """Energy per access or operation in picojoules, for one 32-bit word.

    Defaults: Horowitz, ISSCC 2014, 45 nm. A MAC is one FP multiply plus one FP add.
    """

    mac_mult: float = Field(3.7, ge=0, le=MAX_PJ, description="pJ per FP32 multiply in a PE" + _PJ)
    mac_add: float = Field(0.9, ge=0, le=MAX_PJ, description="pJ per FP32 add in a PE" + _PJ)
    register_file: float = Field(
        1.0, ge=0, le=MAX_PJ, description="pJ per 32-bit register-file access" + _PJ
    )
    sram: float = Field(
        5.0, ge=0, le=MAX_PJ, description="pJ per 32-bit SRAM access (8 KB bank)" + _PJ
    )
    dram: float = Field(640.0, ge=0, le=MAX_PJ, description="pJ per 32-bit DRAM access" + _PJ)
    int_add: float = Field(
        0.1, ge=0, le=MAX_PJ, description="pJ per 32-bit integer add or compare" + _PJ
    )
    int_mult: float = Field(
        3.1, ge=0, le=MAX_PJ, description="pJ per 32-bit integer multiply" + _PJ
    )


class AreaTable(_Spec):
    """Area of each component in µm², at the 45 nm node of the energy table.

    Defaults and their sources (backend/sim/area.py says how they are combined and what is
    assumed there):
    - arithmetic: Horowitz, ISSCC 2014 ("Computing's energy problem"), 45 nm: FP32 multiply
      7,700, FP32 add 4,184, FP16 multiply 1,640, FP16 add 1,360 µm².
    - register bit and comparator: the 40 nm component table of Aladdin (Shao et al., ISCA
      2014) as Accelergy's component library ships it (a 1-bit register 5.98 µm², a 32-bit
      comparator 71 µm²), scaled to 45 nm by (45/40)^2 (assumed: ideal area scaling) = 7.568
      and 89.86 µm².
    - SRAM: the rule of thumb of about 600 F^2 per SRAM bit cell, F the feature size (D. J.
      Greaves, System-on-Chip Design lecture notes, "45nm SRAM Memory Area and Power
      Consumption", beside CACTI's scaling formulae), F = 45 nm: 1.215 µm² a bit, 9,953 µm² a
      KiB. Assumed: that figure stands for the whole buffer, decoders and sense amplifiers
      included (600 F^2 is about 3.5x a 45 nm 6T cell), whatever its size and ports.
    - assumed (no source): interconnect and control as a fraction of all other area; the depth
      of the FIFOs feeding the array's edges.
    """

    fp32_mult: float = Field(7700.0, ge=0, description="µm² of an FP32 multiplier")
    fp32_add: float = Field(4184.0, ge=0, description="µm² of an FP32 adder")
    fp16_mult: float = Field(1640.0, ge=0, description="µm² of an FP16 multiplier")
    fp16_add: float = Field(1360.0, ge=0, description="µm² of an FP16 adder")
    register_bit: float = Field(7.568, ge=0, description="µm² of one register (flip-flop) bit")
    comparator_32: float = Field(
        89.86, ge=0, description="µm² of a 32-bit equality/magnitude comparator (scales by width)"
    )
    sram_kib: float = Field(9953.28, ge=0, description="µm² of one KiB of SRAM, periphery included")
    edge_fifo_words: int = Field(
        2, ge=0, le=1024, description="words of FIFO at each array row's and column's edge"
    )
    interconnect_fraction: float = Field(
        0.1, ge=0, le=10, description="interconnect and control, as a fraction of all other area"
    )


class HardwareExtension(_Spec):
    """Hardware beside the array that a technique uses; `enabled`: the accelerator has it."""

    enabled: bool = Field(True, description="whether the accelerator has this extension")


class McacheHardware(HardwareExtension):
    """The MCACHE that stores signatures with their computed results, and how signatures are made.

    The MCACHE's geometry (entries, ways) decides which vectors hit, and hits change the trained
    outputs, so it is a training parameter (MercuryParams.cache_entries / cache_ways), not an
    accelerator field; the accelerator sets how fast lookups go.
    """

    enabled: Annotated[bool, Hardware(area=True)] = Field(
        True, description="whether the accelerator has an MCACHE"
    )
    lookup_latency: Annotated[int, Hardware(unit="cycles")] = Field(
        1,
        ge=0,
        le=64,
        description="cycles from a lookup's issue to its hit/miss answer; at most 64 (an on-chip "
        "cache answers within tens of cycles)",
    )
    lookups_per_cycle: Annotated[int, Hardware(searchable=True, area=True)] = Field(
        0,
        ge=0,
        le=1024,
        description="MCACHE lookup ports; 0 = one per PE row (each row looks up its next vector); "
        "at most 1024, one per row of the largest array",
    )
    projection_macs_per_cycle: Annotated[
        int, Hardware(unit="MACs/cycle", searchable=True, area=True)
    ] = Field(
        0,
        ge=0,
        le=1 << 20,
        description="throughput of a signature projection unit beside the array, fed by the FWD "
        "input stream; 0 = no unit, the projection runs on the array; at most 2^20 (larger "
        "than the largest array)",
    )

    @model_validator(mode="before")
    @classmethod
    def _drop_retired_fields(cls, data: object) -> object:
        """Configs stored before the MCACHE geometry moved to the training still load."""
        if isinstance(data, dict) and RETIRED_MCACHE_FIELDS & data.keys():
            data = {k: v for k, v in data.items() if k not in RETIRED_MCACHE_FIELDS}
        return data


RETIRED_MCACHE_FIELDS = frozenset({"mcache_entries", "mcache_ways"})


class ZeroSkipping(HardwareExtension):
    """A sparsity-aware dataflow that skips MACs whose streamed operand is zero."""

    enabled: Annotated[bool, Hardware(area=True)] = Field(
        True, description="whether PEs skip zero operands"
    )


class GradientPredictorUnit(HardwareExtension):
    """The ADA-GP extension: a small unit that runs the gradient predictors."""

    enabled: Annotated[bool, Hardware(area=True)] = Field(
        True, description="whether the accelerator has a predictor unit"
    )
    macs_per_cycle: Annotated[int, Hardware(unit="MACs/cycle", searchable=True, area=True)] = Field(
        256,
        ge=1,
        le=1 << 20,
        description="predictor unit throughput in MACs per cycle; 1 to 2^20 (larger than the "
        "largest array)",
    )


StorageFormat = Literal["dense", "bitmap", "compressed"]


class OperandStorage(_Spec):
    """How each kind of tensor is stored in SRAM and DRAM, so traffic follows its density.

    Words per element of a tensor with non-zero fraction d, for w = 8 * word_bytes bits a word:
    dense 1; bitmap d + 1 / w (the non-zero values plus one presence bit per element);
    compressed d * (1 + index_bits / w) (each non-zero value with its index). With
    `dense_fallback` (the default) a tensor whose format would be larger than dense is stored
    dense, as real formats do: min(1, the format's words). The choice is made per tensor (per
    GEMM operand, at its measured density), not per tile or per mini-batch.
    Kinds, by GEMM operand (backend.sim.lowering): activations = FWD A and C, BWD-WEIGHT B;
    gradients = BWD-DATA and BWD-WEIGHT A and C; weights = FWD and BWD-DATA B.
    """

    activations: StorageFormat = Field("dense", description="inputs and outputs of layers")
    gradients: StorageFormat = Field("dense", description="output, input and weight gradients")
    weights: StorageFormat = Field("dense", description="layer weights")
    index_bits: Annotated[int, Hardware(unit="bits", area=True)] = Field(
        16,
        ge=1,
        le=64,
        description="bits of the index stored with each non-zero (compressed); 1 to 64 (a 64-bit "
        "index addresses any tensor)",
    )
    dense_fallback: bool = Field(
        True,
        description="store a tensor dense where its bitmap or compressed form would be larger "
        "(words per element = min(1, the format's))",
    )

    def dense(self) -> OperandStorage:
        """This storage with every kind of tensor stored dense."""
        return self.model_copy(
            update={"activations": "dense", "gradients": "dense", "weights": "dense"}
        )


class AcceleratorConfig(_Spec):
    """One accelerator design point."""

    name: str = Field(
        "custom", min_length=1, max_length=64, description="label for tables and charts"
    )
    rows: Annotated[int, Hardware(unit="PEs", searchable=True, area=True)] = Field(
        32, ge=1, le=1024, description="systolic array rows (PEs); 1 to 1024 (4x a TPU's)"
    )
    cols: Annotated[int, Hardware(unit="PEs", searchable=True, area=True)] = Field(
        32, ge=1, le=1024, description="systolic array columns (PEs); 1 to 1024 (4x a TPU's)"
    )
    dataflow: Annotated[Dataflow, Hardware(searchable=True)] = Field(
        "os",
        description="output-, weight- or input-stationary systolic GEMM, or 'row': 1-D "
        "convolutions of input rows with kernel rows (convolutions; other GEMMs run as 'os')",
    )
    ifmap_sram_kib: Annotated[int, Hardware(unit="KiB", searchable=True, area=True)] = Field(
        64, ge=1, le=1 << 20, description="input-operand SRAM in KiB" + _SRAM
    )
    filter_sram_kib: Annotated[int, Hardware(unit="KiB", searchable=True, area=True)] = Field(
        64, ge=1, le=1 << 20, description="weight-operand SRAM in KiB" + _SRAM
    )
    ofmap_sram_kib: Annotated[int, Hardware(unit="KiB", searchable=True, area=True)] = Field(
        64, ge=1, le=1 << 20, description="output SRAM in KiB" + _SRAM
    )
    dram_bandwidth: Annotated[float, Hardware(unit="words/cycle", searchable=True)] = Field(
        8.0,
        ge=MIN_DRAM_WORDS_PER_CYCLE,
        le=MAX_DRAM_WORDS_PER_CYCLE,
        description="DRAM bandwidth in words per cycle; 0.001 (one word per thousand cycles, "
        "slower than any memory interface) to 65536 (beyond any HBM stack)",
    )
    word_bytes: Annotated[int, Hardware(unit="bytes", area=True)] = Field(
        4, ge=1, le=8, description="bytes per operand word; 1 to 8 (8- to 64-bit operands)"
    )
    conv_operand_traffic: ConvOperandTraffic = Field(
        "im2col",
        description="convolution operands moved as im2col matrices (SCALE-Sim) or as the real "
        "feature maps with windows formed on chip",
    )
    clock_mhz: Annotated[float, Hardware(unit="MHz", searchable=True)] = Field(
        500.0,
        ge=MIN_CLOCK_MHZ,
        le=MAX_CLOCK_MHZ,
        description="clock frequency in MHz; 1 MHz (slower than any accelerator) to 10 GHz "
        "(beyond any CMOS logic clock)",
    )
    storage: OperandStorage = Field(default_factory=OperandStorage)
    energy: EnergyTable = Field(default_factory=EnergyTable)
    area: AreaTable = Field(default_factory=AreaTable)
    mcache: McacheHardware = Field(default_factory=McacheHardware)
    zero_skipping: ZeroSkipping = Field(default_factory=ZeroSkipping)
    gradient_predictor: GradientPredictorUnit = Field(default_factory=GradientPredictorUnit)
    extension_overlap: ExtensionOverlap = Field(
        "overlapped",
        description="'overlapped': MCACHE lookups, column-unit work and a projection unit run "
        "alongside the array, only what outlasts it is exposed; 'serial': all after the array",
    )

    @property
    def extensions_on(self) -> tuple[str, ...]:
        """The extensions this config has switched on, by field name."""
        return tuple(name for name in EXTENSIONS if getattr(self, name).enabled)

    def with_extensions(self, extensions: Collection[str]) -> AcceleratorConfig:
        """This accelerator with only these extensions switched on (where it offers them).
        Where zero-skipping ends up off, it stores every tensor dense: bitmap and compressed
        formats are part of the zero-skipping hardware (see the module docstring)."""
        update: dict[str, Any] = {
            name: getattr(self, name).model_copy(
                update={"enabled": getattr(self, name).enabled and name in extensions}
            )
            for name in EXTENSIONS
        }
        if not update["zero_skipping"].enabled:
            update["storage"] = self.storage.dense()
        return self.model_copy(update=update)


def _is_model(info: FieldInfo, kind: type[BaseModel] = BaseModel) -> bool:
    return isinstance(info.annotation, type) and issubclass(info.annotation, kind)


EXTENSIONS: tuple[str, ...] = tuple(
    name
    for name, info in AcceleratorConfig.model_fields.items()
    if _is_model(info, HardwareExtension)
)


def leaf_fields(model: type[BaseModel], prefix: str = "") -> dict[str, FieldInfo]:
    """The fields of `model` that hold a value, those of its nested models included, by dotted
    path ("rows", "mcache.lookups_per_cycle")."""
    leaves: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if _is_model(info):
            leaves |= leaf_fields(info.annotation, f"{prefix}{name}.")  # type: ignore[arg-type]
        else:
            leaves[prefix + name] = info
    return leaves


# Every value of an accelerator config by dotted path: what the design tools read (Hardware).
ACCELERATOR_FIELDS: dict[str, FieldInfo] = leaf_fields(AcceleratorConfig)


def hardware(path: str) -> Hardware:
    """What the accelerator field at `path` declares (Hardware() where it declares nothing)."""
    declared = (m for m in ACCELERATOR_FIELDS[path].metadata if isinstance(m, Hardware))
    return next(declared, Hardware())


def field_value(config: AcceleratorConfig, path: str) -> Any:
    """The value of the accelerator field at dotted `path`."""
    return attrgetter(path)(config)


def _paper_accelerator(**fields: Any) -> AcceleratorConfig:
    """A paper's accelerator: the assumed array and memories below, and no extension but the
    ones `fields` switch on."""
    base: dict[str, Any] = {
        "rows": 32,
        "cols": 32,
        "dataflow": "os",
        "ifmap_sram_kib": 64,
        "filter_sram_kib": 64,
        "ofmap_sram_kib": 64,
        "dram_bandwidth": 8.0,
        "clock_mhz": 500.0,
        "conv_operand_traffic": "tensor",
    }
    return AcceleratorConfig(**(base | fields)).with_extensions(fields.keys() & set(EXTENSIONS))


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
    "sparsetrain-like": _paper_accelerator(
        name="sparsetrain-like",
        rows=16,
        cols=16,
        dataflow="row",
        zero_skipping=ZeroSkipping(enabled=True),
        storage=OperandStorage(activations="compressed", gradients="compressed"),
    ),
    "mercury-like": _paper_accelerator(
        name="mercury-like",
        mcache=McacheHardware(
            enabled=True, lookups_per_cycle=0, lookup_latency=1, projection_macs_per_cycle=0
        ),
    ),
    "adagp-like": _paper_accelerator(
        name="adagp-like",
        gradient_predictor=GradientPredictorUnit(enabled=True, macs_per_cycle=256),
    ),
}


def check_preset(choice: str | AcceleratorConfig) -> None:
    """ValueError naming the presets when `choice` is a name that is not one of them."""
    if isinstance(choice, str) and choice not in PRESETS:
        raise ValueError(f"unknown preset '{choice}'; choose one of {sorted(PRESETS)}")
