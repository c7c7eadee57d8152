"""Run SCALE-Sim v3.0.0 on GEMM or convolution layers and read back its reports.

SCALE-Sim writes its reports to disk, so every run happens in a caller-given directory. It runs in
"CALC" bandwidth mode (no DRAM bandwidth limit) so its Total Cycles are the stall-free compute
cycles that backend.sim.systolic reproduces.

Regenerate the stored table (used when scalesim is not installed) with
`python -m tests.sim.scalesim_harness`.
"""

from __future__ import annotations

import builtins
import contextlib
import csv
import io
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REFERENCE_TABLE = Path(__file__).with_name("scalesim_reference.json")

ARRAYS = ((4, 4), (8, 4), (3, 5), (16, 16))
DATAFLOWS = ("os", "ws", "is")

# GEMMs (m, k, n) from lowering small layers for the three training passes at batch 1:
# conv 3x3 on 6x6x3 -> 4 filters, stride-2 conv, pointwise conv, linear, attention matmuls.
GEMMS = (
    (36, 27, 4), (36, 4, 27), (4, 36, 27),  # conv 3x3, padding 1
    (9, 72, 16), (9, 16, 72), (16, 9, 72),  # conv 3x3 stride 2 on 6x6x8 -> 16
    (49, 5, 11), (49, 11, 5), (11, 49, 5),  # pointwise conv 7x7x5 -> 11
    (3, 40, 10), (3, 10, 40), (10, 3, 40),  # linear 40 -> 10 on 3 rows
    (12, 8, 12), (12, 12, 8), (8, 1, 1), (1, 1, 1), (17, 33, 2),  # attention and edge shapes
)  # fmt: skip

# Convolution layers (ifmap h, w, filter h, w, channels, filters, stride) for the lowering check.
CONVS = ((7, 7, 3, 3, 2, 5, 1), (9, 8, 3, 2, 3, 4, 2), (6, 6, 1, 1, 6, 3, 1))

_CONFIG = """[general]
run_name = run

[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
IfmapSramSzkB = {ifmap_kb}
FilterSramSzkB = {filter_kb}
OfmapSramSzkB = {ofmap_kb}
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Bandwidth = {bandwidth}
Dataflow = {dataflow}
ReadRequestBuffer = 32
WriteRequestBuffer = 32

[layout]
IfmapCustomLayout = False
IfmapSRAMBankBandwidth = 10
IfmapSRAMBankNum = 10
IfmapSRAMBankPort = 2
FilterCustomLayout = False
FilterSRAMBankBandwidth = 10
FilterSRAMBankNum = 10
FilterSRAMBankPort = 2

[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40

[run_presets]
InterfaceBandwidth = {mode}
UseRamulatorTrace = False
"""


@dataclass(frozen=True)
class ScaleSimLayer:
    """One layer's figures from SCALE-Sim's COMPUTE and DETAILED_ACCESS reports."""

    total_cycles: int
    stall_cycles: int
    mapping_efficiency_pct: float
    ifmap_sram_reads: int
    filter_sram_reads: int
    ofmap_sram_writes: int


@dataclass(frozen=True)
class ScaleSimMemory:
    """One layer's cycles and DRAM traffic from SCALE-Sim's COMPUTE and DETAILED_ACCESS
    reports (USER bandwidth mode: stalls when DRAM cannot keep up)."""

    overall_cycles: int  # "Total Cycles (incl. prefetch)": from the first DRAM read
    total_cycles: int  # "Total Cycles": compute plus stalls, without the initial fill
    stall_cycles: int
    ifmap_dram_reads: int
    filter_dram_reads: int
    ofmap_dram_writes: int


def _patch_numpy_compat() -> None:
    # SCALE-Sim 3.0.0 calls int(max(list of 1-element arrays)); NumPy >= 2.4 refuses int() on
    # arrays with ndim > 0. Give the modules that do it a max() that returns the scalar, as NumPy
    # did: the double-buffered scratchpad, and (USER bandwidth mode) the read and write buffers.
    import scalesim.memory.double_buffered_scratchpad_mem as scratchpad
    import scalesim.memory.read_buffer as read_buffer
    import scalesim.memory.write_buffer as write_buffer

    def scalar_max(*args, **kwargs):
        value = builtins.max(*args, **kwargs)
        return value.item() if isinstance(value, np.ndarray) and value.size == 1 else value

    for module in (scratchpad, read_buffer, write_buffer):
        module.max = scalar_max


def run_scalesim(
    workdir: Path,
    rows: int,
    cols: int,
    dataflow: str,
    gemms: tuple[tuple[int, int, int], ...] = (),
    convs: tuple[tuple[int, ...], ...] = (),
) -> list[ScaleSimLayer]:
    """Run GEMMs (m, k, n) or convolutions through SCALE-Sim in `workdir`."""
    compute, access = _run(workdir, _config(rows, cols, dataflow), gemms, convs)
    return [
        ScaleSimLayer(
            total_cycles=int(c[2]),
            stall_cycles=int(c[3]),
            mapping_efficiency_pct=float(c[5]),
            ifmap_sram_reads=int(float(a[3])),
            filter_sram_reads=int(float(a[6])),
            ofmap_sram_writes=int(float(a[9])),
        )
        for c, a in zip(compute, access, strict=True)
    ]


def run_scalesim_memory(
    workdir: Path,
    rows: int,
    cols: int,
    dataflow: str,
    bandwidth: int,
    sram_kb: tuple[int, int, int],
    gemms: tuple[tuple[int, int, int], ...] = (),
    convs: tuple[tuple[int, ...], ...] = (),
) -> list[ScaleSimMemory]:
    """Run layers in SCALE-Sim's USER bandwidth mode (`bandwidth` words per cycle, SRAMs of
    `sram_kb` = ifmap, filter, ofmap KB) and read back cycles and DRAM traffic."""
    config = _config(rows, cols, dataflow, bandwidth, sram_kb, mode="USER")
    compute, access = _run(workdir, config, gemms, convs)
    return [
        ScaleSimMemory(
            overall_cycles=int(c[1]),
            total_cycles=int(c[2]),
            stall_cycles=int(c[3]),
            ifmap_dram_reads=int(float(a[12])),
            filter_dram_reads=int(float(a[15])),
            ofmap_dram_writes=int(float(a[18])),
        )
        for c, a in zip(compute, access, strict=True)
    ]


def _config(
    rows: int,
    cols: int,
    dataflow: str,
    bandwidth: int = 10,
    sram_kb: tuple[int, int, int] = (64, 64, 64),
    mode: str = "CALC",
) -> str:
    ifmap_kb, filter_kb, ofmap_kb = sram_kb
    return _CONFIG.format(
        rows=rows, cols=cols, dataflow=dataflow, bandwidth=bandwidth, mode=mode,
        ifmap_kb=ifmap_kb, filter_kb=filter_kb, ofmap_kb=ofmap_kb,
    )  # fmt: skip


def _run(
    workdir: Path,
    config_text: str,
    gemms: tuple[tuple[int, int, int], ...],
    convs: tuple[tuple[int, ...], ...],
) -> tuple[list[list[str]], list[list[str]]]:
    from scalesim.scale_sim import scalesim

    _patch_numpy_compat()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "scale.cfg"
    config.write_text(config_text)
    topology = workdir / "topology.csv"
    if gemms:
        lines = ["Layer, M, N, K,"] + [f"l{i}, {m}, {n}, {k}," for i, (m, k, n) in enumerate(gemms)]
    else:
        lines = ["Layer, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
                 "Num Filter, Strides,"]  # fmt: skip
        lines += [f"l{i}, " + ", ".join(str(v) for v in conv) + "," for i, conv in enumerate(convs)]
    topology.write_text("\n".join(lines) + "\n")
    layout = workdir / "layout.csv"
    layout.write_text("Layer name,\n")
    with contextlib.redirect_stdout(io.StringIO()):
        sim = scalesim(
            save_disk_space=True,
            verbose=False,
            config=str(config),
            topology=str(topology),
            layout=str(layout),
            input_type_gemm=bool(gemms),
        )
        sim.run_scale(top_path=str(workdir))
    compute = _read_report(workdir / "run" / "COMPUTE_REPORT.csv")
    access = _read_report(workdir / "run" / "DETAILED_ACCESS_REPORT.csv")
    return compute, access


def _read_report(path: Path) -> list[list[str]]:
    with path.open() as f:
        return [[cell.strip() for cell in row] for row in list(csv.reader(f))[1:]]


def reference_cases(workdir: Path) -> list[dict]:
    """Every GEMM and convolution case with SCALE-Sim's figures."""
    cases = []
    for rows, cols in ARRAYS:
        for dataflow in DATAFLOWS:
            tag = f"{rows}x{cols}_{dataflow}"
            gemm_layers = run_scalesim(workdir / f"gemm_{tag}", rows, cols, dataflow, gemms=GEMMS)
            for (m, k, n), layer in zip(GEMMS, gemm_layers, strict=True):
                cases.append(
                    {"kind": "gemm", "shape": [m, k, n], "rows": rows, "cols": cols,
                     "dataflow": dataflow, "scalesim": asdict(layer)}
                )  # fmt: skip
            conv_layers = run_scalesim(workdir / f"conv_{tag}", rows, cols, dataflow, convs=CONVS)
            for conv, layer in zip(CONVS, conv_layers, strict=True):
                cases.append(
                    {"kind": "conv", "shape": list(conv), "rows": rows, "cols": cols,
                     "dataflow": dataflow, "scalesim": asdict(layer)}
                )  # fmt: skip
    return cases


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        table = reference_cases(Path(tmp))
    REFERENCE_TABLE.write_text("[\n" + ",\n".join(json.dumps(case) for case in table) + "\n]\n")
    print(f"wrote {len(table)} cases to {REFERENCE_TABLE.name}")
