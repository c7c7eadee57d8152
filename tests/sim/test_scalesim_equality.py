"""The simulator's dense compute equals SCALE-Sim v3.0.0 on every dataflow.

Compared per layer: Total Cycles (stall-free), mapping efficiency and SRAM requests per operand.
The GEMM cases go through the public simulate(); the convolution cases also check that
lower_conv2d's FWD GEMM is the one SCALE-Sim builds for the layer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.sim import GemmOp, TrainingPass, Workload, simulate
from backend.sim.lowering import lower_conv2d
from backend.specs.accelerator import AcceleratorConfig
from tests.sim.scalesim_harness import REFERENCE_TABLE, reference_cases

# Large SRAMs so no partial sums spill: the array's own requests are then exactly SCALE-Sim's.
BIG_SRAM_KIB = 1 << 16


def _gemm_of(case: dict) -> GemmOp:
    if case["kind"] == "gemm":
        m, k, n = case["shape"]
        return GemmOp(layer="l", pass_=TrainingPass.FWD, m=m, k=k, n=n, executions=1)
    height, width, fh, fw, channels, filters, stride = case["shape"]
    fwd = lower_conv2d("l", 1, channels, filters, height, width, (fh, fw), stride=stride)[0]
    assert fwd.pass_ is TrainingPass.FWD
    return fwd


def _ours(case: dict) -> dict:
    accel = AcceleratorConfig(
        rows=case["rows"],
        cols=case["cols"],
        dataflow=case["dataflow"],
        ifmap_sram_kib=BIG_SRAM_KIB,
        filter_sram_kib=BIG_SRAM_KIB,
        ofmap_sram_kib=BIG_SRAM_KIB,
    )
    workload = Workload(model="m", dataset="d", batch_size=1, iterations=1, ops=[_gemm_of(case)])
    row = simulate(workload, accel).layers[0]
    return {
        "total_cycles": row.compute_cycles,
        "stall_cycles": 0,
        "mapping_efficiency_pct": pytest.approx(row.mapping_efficiency * 100, rel=1e-12),
        "ifmap_sram_reads": row.sram_reads_by_operand["ifmap"],
        "filter_sram_reads": row.sram_reads_by_operand["filter"],
        "ofmap_sram_writes": row.sram_writes_by_operand["ofmap"],
    }


def _stored_cases() -> list[dict]:
    return json.loads(REFERENCE_TABLE.read_text())


def _case_id(case: dict) -> str:
    shape = "x".join(str(v) for v in case["shape"])
    return f"{case['kind']}{shape}-{case['rows']}x{case['cols']}-{case['dataflow']}"


def test_stored_table_covers_every_dataflow_and_many_layers() -> None:
    cases = _stored_cases()
    assert {c["dataflow"] for c in cases} == {"os", "ws", "is"}
    assert len({(c["kind"], tuple(c["shape"])) for c in cases}) >= 20
    assert len(cases) >= 90
    assert all(c["scalesim"]["stall_cycles"] == 0 for c in cases)


@pytest.mark.parametrize("case", _stored_cases(), ids=_case_id)
def test_matches_stored_scalesim_table(case: dict) -> None:
    assert _ours(case) == case["scalesim"]


def test_matches_scalesim_run_now(tmp_path: Path) -> None:
    pytest.importorskip("scalesim")
    live = reference_cases(tmp_path)
    stored = _stored_cases()
    assert [c["scalesim"] for c in live] == [c["scalesim"] for c in stored]
    mismatches = [(_case_id(c), _ours(c), c["scalesim"]) for c in live if _ours(c) != c["scalesim"]]
    assert not mismatches
