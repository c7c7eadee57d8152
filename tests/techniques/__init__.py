"""The toy technique, and how a test makes a technique's entry point visible."""

from __future__ import annotations

from pathlib import Path

from backend.specs.techniques import ENTRY_POINT_GROUP


def install_toy(folder: Path, value: str = "tests.techniques.toy:TECHNIQUE") -> Path:
    """A distribution's metadata in `folder` declaring the toy's entry point (or `value`): with
    `folder` on a fresh interpreter's PYTHONPATH, importlib.metadata finds it as it finds an
    installed package's. Returns the folder."""
    info = folder / "orrery_toy_technique-0.1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: orrery-toy-technique\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntoy = {value}\n", encoding="utf-8"
    )
    return folder
