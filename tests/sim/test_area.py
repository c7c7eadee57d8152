"""The area model (backend/sim/area.py): a preset's area by hand from the table, extensions that
count only when switched on, and an MCACHE that grows with the training's cache."""

import pytest

from backend.sim.area import McacheSize, area
from backend.specs.accelerator import PRESETS, AcceleratorConfig, AreaTable
from backend.specs.techniques import extension_sizes
from backend.techniques.mercury.params import MercuryParams
from worker.storage import run_area


def test_mercury_like_area_by_hand() -> None:
    """mercury-like: 32 x 32 PEs of FP32, 3 x 64 KiB SRAM, an MCACHE of MercuryParams' defaults
    (1024 entries, 4 ways, 32-bit signatures) with one lookup port per PE row; nothing else."""
    pe = 7700 + 4184 + 3 * 32 * 7.568  # FP32 multiplier + adder, three 32-bit registers
    pe_array = 32 * 32 * pe
    column_units = 32 * (7700 + 4184 + 89.86)  # a MAC and a 32-bit comparator per column
    edge_fifos = (32 + 32) * 2 * 32 * 7.568  # two 32-bit words at each row's and column's edge
    sram = (64 + 64 + 64) * 9953.28
    # entry: 32 tag + 1 valid + 2 LRU + 32 result bits, at 9953.28 / 8192 µm² a bit
    mcache_sram = 1024 * (32 + 1 + 2 + 32) * 9953.28 / 8192
    mcache_comparators = 32 * 4 * 89.86  # 32 ports (one per row) x 4 ways, 32-bit tags
    subtotal = pe_array + column_units + edge_fifos + sram + mcache_sram + mcache_comparators
    by_hand_um2 = subtotal * 1.1  # + 10 % interconnect and control
    # The same sum written out in µm²: 12,913,180.672 + 383,163.52 + 30,998.528 + 1,911,029.76
    # + 83,358.72 + 11,502.08 = 15,333,233.28; x 1.1 = 16,866,556.608 (16.87 mm²).
    assert by_hand_um2 == pytest.approx(16_866_556.608, rel=1e-12)

    result = area(PRESETS["mercury-like"])
    assert result.area_mm2 == pytest.approx(by_hand_um2 / 1e6, rel=1e-12)
    assert result.components["mcache_sram"] == pytest.approx(mcache_sram)
    assert result.components["zero_skipping"] == result.components["gradient_predictor"] == 0


@pytest.mark.parametrize("extension", ["zero_skipping", "mcache", "gradient_predictor"])
def test_an_extension_adds_its_unit_only_when_switched_on(extension: str) -> None:
    accel = PRESETS["edge"]  # offers every extension
    plain = area(accel.with_extensions([]))
    with_one = area(accel.with_extensions([extension]))
    units = {
        "zero_skipping": ["zero_skipping"],
        "mcache": ["mcache_sram", "mcache_comparators", "projection_unit"],
        "gradient_predictor": ["gradient_predictor"],
    }[extension]
    assert all(plain.components[name] == 0 for name in units)
    assert all(with_one.components[name] > 0 for name in units if name != "projection_unit")
    for name, value in plain.components.items():
        if name not in (*units, "interconnect"):
            assert with_one.components[name] == value
    added = sum(with_one.components[name] for name in units)
    assert with_one.total_um2 - plain.total_um2 == pytest.approx(1.1 * added)


def test_extension_units_by_hand() -> None:
    """edge: 16 x 16 FP32 PEs; zero-skipping with 16-bit indices; a 256-MAC predictor unit."""
    edge = PRESETS["edge"]
    index_unit = 16 * 7.568 + 89.86 * 16 / 32  # index register + 16-bit index comparator
    codec = 89.86 + index_unit  # zero detector (32-bit comparator) + index unit
    zero_skipping = area(edge.with_extensions(["zero_skipping"])).components["zero_skipping"]
    assert zero_skipping == pytest.approx(256 * index_unit + (16 + 16) * codec)
    predictor = area(edge.with_extensions(["gradient_predictor"])).components["gradient_predictor"]
    assert predictor == pytest.approx(256 * (7700 + 4184 + 3 * 32 * 7.568))
    projection = edge.model_copy(
        update={"mcache": edge.mcache.model_copy(update={"projection_macs_per_cycle": 64})}
    )
    assert area(projection).components["projection_unit"] == pytest.approx(64 * (7700 + 4184))


def test_mcache_area_grows_with_its_entries() -> None:
    accel = PRESETS["mercury-like"]
    sizes = [area(accel, McacheSize(entries=entries)).area_mm2 for entries in (64, 256, 1024, 4096)]
    assert sizes == sorted(sizes) and len(set(sizes)) == 4
    # Entries scale the SRAM linearly: 4x the entries, 4x the MCACHE SRAM.
    small = area(accel, McacheSize(entries=256)).components["mcache_sram"]
    large = area(accel, McacheSize(entries=1024)).components["mcache_sram"]
    assert large == pytest.approx(4 * small)
    # More ways, more comparators per port; a direct-mapped cache compares one tag.
    four = area(accel, McacheSize(ways=4)).components["mcache_comparators"]
    assert area(accel, McacheSize(ways=8)).components["mcache_comparators"] == pytest.approx(
        2 * four
    )
    direct = area(accel, McacheSize(ways=4, direct=True)).components["mcache_comparators"]
    assert direct == pytest.approx(four / 4)


def test_the_run_sizes_the_mcache_from_its_mercury_parameters() -> None:
    defaults = MercuryParams()
    assert extension_sizes(None) == {
        "mcache": McacheSize(defaults.cache_entries, defaults.cache_ways, defaults.max_bits)
    }
    assert McacheSize() == extension_sizes(None)["mcache"]
    params = [{"name": "mercury", "cache_entries": 4096, "cache_ways": 8, "max_bits": 48}]
    assert extension_sizes(params) == {"mcache": McacheSize(4096, 8, 48)}
    config = PRESETS["mercury-like"].model_dump()
    assert run_area(config, params).area_mm2 > run_area(config, None).area_mm2
    assert run_area(config, params) == area(PRESETS["mercury-like"], McacheSize(4096, 8, 48))


def test_precision_and_an_edited_table() -> None:
    fp16 = PRESETS["adagp-like"].model_copy(update={"word_bytes": 2})
    pe = area(fp16).components["pe_array"] / (32 * 32)
    assert pe == pytest.approx(1640 + 1360 + 3 * 16 * 7.568)
    cheap_sram = PRESETS["adagp-like"].model_copy(update={"area": AreaTable(sram_kib=1000.0)})
    assert area(cheap_sram).components["sram"] == pytest.approx(192 * 1000.0)


def test_a_config_stored_before_the_area_table_still_validates() -> None:
    stored = PRESETS["edge"].model_dump()
    del stored["area"]
    assert AcceleratorConfig.model_validate(stored).area == AreaTable()
