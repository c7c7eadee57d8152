"""MERCURY (HPCA 2023): reuse the outputs of input vectors whose random-projection signatures
match, looked up in an MCACHE. Training hook: training.py; signatures: signatures.py; the MCACHE
models: mcache.py."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from backend.techniques.entry import Figure, Paper, TechniqueEntry
from backend.techniques.mercury.params import MercuryParams

if TYPE_CHECKING:
    from backend.sim.area import McacheSize
    from backend.training.technique import Technique


def _mcache_size(params: Mapping[str, Any]) -> McacheSize:
    # Imported when called, by the worker: the API reads this entry and imports no worker code.
    from backend.techniques.mercury.hardware import mcache_size

    return mcache_size(params)


def _training_hook() -> type[Technique]:
    from backend.techniques.mercury.training import Mercury

    return Mercury


TECHNIQUE = TechniqueEntry(
    name="mercury",
    label="MERCURY",
    params_model=MercuryParams,
    training_hook=_training_hook,
    hardware_extension="mcache",
    extension_size=_mcache_size,
    figures=(
        Figure(
            "hit_rate",
            "hit rate",
            "FWD rows whose output was copied from a cached owner / FWD rows (per layer: that "
            "layer's, while its reuse is on; the epoch's: over every layer, a layer whose reuse "
            "is off, switched off or excluded, counting as zero; a training's: over all its "
            "epochs)",
            over_training="mean",
        ),
        Figure(
            "reuse_macs",
            "MAC-weighted reuse",
            "share of the FWD and BWD-WEIGHT MACs that reuse skipped: FWD hit rows and "
            "BWD-WEIGHT folded positions, each worth its layer's MACs per row (per layer: that "
            "layer's, while its reuse is on; the epoch's: over every layer, a layer whose reuse "
            "is off counting as zero; a training's: over all its epochs). BWD-DATA, which reuse "
            "leaves dense, is not in the denominator",
            over_training="mean",
        ),
    ),
    paper=Paper(
        title="MERCURY: input similarity",
        venue="HPCA 2023",
        headline="1.97x average speedup over 12 models, accuracy similar to the baseline",
        speedup=1.97,
        energy_ratio=None,
        accuracy="similar to the baseline",
        miniature=Path(__file__).with_name("miniature.yaml"),
        figure="hit_rate",
    ),
)
