"""Human titles for spec fields, as the OpenAPI schema carries them and the submit form shows them.

Pydantic's default title of `bn_recalibration_images` is "Bn Recalibration Images"; a person
reads "BatchNorm recalibration images". `field_title` writes a field's name in sentence case
with its abbreviations spelled out or capitalised (WORDS) and its unit in brackets (UNITS). A
field whose `title=` is given keeps it. Every spec model's config names this generator, so a new
technique's knobs get readable titles with no code of their own; a new abbreviation goes in
WORDS.
"""

from __future__ import annotations

from typing import Any

WORDS = {
    "bn": "BatchNorm",
    "lr": "learning rate",
    "bp": "BP",
    "gp": "GP",
    "sram": "SRAM",
    "dram": "DRAM",
    "mac": "MAC",
    "macs": "MACs",
    "mcache": "MCACHE",
    "fp16": "FP16",
    "fp32": "FP32",
    "int": "integer",
    "mult": "multiply",
    "cols": "columns",
    "conv": "convolution",
    "fifo": "FIFO",
    "id": "ID",
}
UNITS = {"kib": "KiB", "mhz": "MHz", "pj": "pJ", "mm2": "mm²"}


def field_title(name: str, _info: Any = None) -> str:
    """`name` as a title: "lr_schedule" -> "Learning rate schedule", "clock_mhz" -> "Clock
    (MHz)"."""
    words = name.split("_")
    unit = UNITS.get(words[-1]) if len(words) > 1 else None
    if unit:
        words = words[:-1]
    text = " ".join(WORDS.get(word, word) for word in words)
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text
