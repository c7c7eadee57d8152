"""The technique papers' headlines and their miniatures, as the papers page's API and
`benchmarks/paper_check.py` read them. Each paper is declared in its technique's folder
(`TechniqueEntry.paper`, backend/techniques/NAME/); this module collects them and says which
stored experiments are a miniature's.

A *miniature* is a small, fully written-out experiment that asks each paper's question on this
installation (its paper's accelerator preset beside the generic ones, 3 seeds). The miniatures
ship inside the package (backend/techniques/NAME/miniature.yaml, so an installed server has
them); `examples/papers/*.yaml`, where users find them, are links to those files.

Which stored runs are a miniature's (the open choice): those of experiments whose stored spec
equals the miniature's spec, validated the same way, apart from `team_id` (where it was shared).
So a miniature submitted from the papers page, with `orrery submit examples/papers/X.yaml`, or by
`paper_check.py` counts, and an edited copy (another epoch count, another seed, another name)
does not: its numbers answer another question. Nothing extra is stored on the experiment.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import yaml

from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import TECHNIQUES
from backend.techniques.entry import Paper

IGNORED_IN_MATCH = ("team_id",)

# Keyed by the technique's name, in the table's order.
PAPERS: dict[str, Paper] = {entry.name: entry.paper for entry in TECHNIQUES if entry.paper}


def summary_line(paper: Paper) -> str:
    """The paper and its headline on one line."""
    return f"{paper.title.split(':')[0]} ({paper.venue}): {paper.headline}"


@cache
def miniature_text(key: str) -> str:
    return PAPERS[key].miniature.read_text(encoding="utf-8")


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
