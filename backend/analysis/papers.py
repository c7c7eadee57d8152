"""The technique papers' headlines and their miniatures: one table, read by the papers page's API
and by `benchmarks/paper_check.py`.

A *miniature* is a small, fully written-out experiment that asks each paper's question on this
installation (its paper's accelerator preset beside the generic ones, 3 seeds). The miniatures
ship inside the package (`backend/analysis/miniatures/`, so an installed server has them);
`examples/papers/*.yaml`, where users find them, are links to those files.

Which stored runs are a miniature's (the open choice): those of experiments whose stored spec
equals the miniature's spec, validated the same way, apart from `team_id` (where it was shared).
So a miniature submitted from the papers page, with `orrery submit examples/papers/X.yaml`, or by
`paper_check.py` counts, and an edited copy (another epoch count, another seed, another name)
does not: its numbers answer another question. Nothing extra is stored on the experiment.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from backend.specs.experiment import ExperimentSpec

MINIATURES_DIR = Path(__file__).resolve().parent / "miniatures"
IGNORED_IN_MATCH = ("team_id",)


@dataclass(frozen=True)
class Paper:
    key: str  # the miniature's file name
    title: str
    venue: str
    headline: str  # the claim in the paper's words, figures included
    speedup: float  # average speedup the paper reports
    energy_ratio: float | None  # technique energy / baseline energy, where the paper gives one
    accuracy: str  # what the paper says of accuracy


PAPERS: dict[str, Paper] = {
    paper.key: paper
    for paper in (
        Paper(
            key="mercury",
            title="MERCURY: input similarity",
            venue="HPCA 2023",
            headline="1.97x average speedup over 12 models, accuracy similar to the baseline",
            speedup=1.97,
            energy_ratio=None,
            accuracy="similar to the baseline",
        ),
        Paper(
            key="adagp",
            title="ADA-GP: adaptive gradient prediction",
            venue="MICRO 2023",
            headline="1.47x average speedup over 15 models, 34% less energy (ratio 0.66), "
            "similar or higher accuracy",
            speedup=1.47,
            energy_ratio=0.66,
            accuracy="similar or higher",
        ),
        Paper(
            key="sparsetrain",
            title="SparseTrain: dataflow sparsity",
            venue="DAC 2020",
            headline="~2.7x speedup and 2.2x energy efficiency (energy ratio ~0.45) on "
            "AlexNet/ResNet, accuracy kept",
            speedup=2.7,
            energy_ratio=round(1 / 2.2, 2),
            accuracy="kept",
        ),
    )
}


def summary_line(paper: Paper) -> str:
    """The paper and its headline on one line."""
    return f"{paper.title.split(':')[0]} ({paper.venue}): {paper.headline}"


@cache
def miniature_text(key: str) -> str:
    return (MINIATURES_DIR / f"{key}.yaml").read_text(encoding="utf-8")


def miniature_spec(key: str) -> dict[str, Any]:
    """The miniature as written (a fresh dict: callers may change it)."""
    return yaml.safe_load(miniature_text(key))


def comparable(spec: dict[str, Any]) -> dict[str, Any]:
    """A validated spec, as stored, without what does not change the question it asks."""
    stored = ExperimentSpec.model_validate(spec).model_dump(mode="json")
    return {k: v for k, v in stored.items() if k not in IGNORED_IN_MATCH}


@cache
def _comparable_miniature(key: str) -> dict[str, Any]:
    return comparable(miniature_spec(key))


def is_miniature(key: str, stored_spec: dict[str, Any]) -> bool:
    """Whether an experiment's stored spec is this paper's miniature (see the module's doc)."""
    stored = {k: v for k, v in stored_spec.items() if k not in IGNORED_IN_MATCH}
    return stored == _comparable_miniature(key)
