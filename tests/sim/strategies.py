"""Hypothesis strategies for accelerators and GEMM dimensions."""

from __future__ import annotations

from hypothesis import strategies as st

from backend.specs.accelerator import AcceleratorConfig, ZeroSkipping

dims = st.integers(min_value=1, max_value=300)
# "row" runs GEMMs without convolution geometry as "os" (backend.sim.row_dataflow)
dataflows = st.sampled_from(["os", "ws", "is", "row"])


@st.composite
def accelerators(draw: st.DrawFn, zero_skipping: bool | None = None) -> AcceleratorConfig:
    skips = draw(st.booleans()) if zero_skipping is None else zero_skipping
    return AcceleratorConfig(
        rows=draw(st.integers(1, 64)),
        cols=draw(st.integers(1, 64)),
        dataflow=draw(dataflows),
        ifmap_sram_kib=draw(st.integers(1, 256)),
        filter_sram_kib=draw(st.integers(1, 256)),
        ofmap_sram_kib=draw(st.integers(1, 256)),
        dram_bandwidth=draw(st.sampled_from([0.5, 1.0, 4.0, 32.0])),
        word_bytes=draw(st.sampled_from([1, 2, 4])),
        zero_skipping=ZeroSkipping(enabled=skips),
    )
