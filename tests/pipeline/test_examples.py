"""Every example spec is valid and expands to runs, each technique with its baseline."""

from pathlib import Path

import pytest
import yaml

from backend.experiments.expand import expand
from backend.specs.experiment import ExperimentSpec

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def test_there_are_examples_for_each_paper() -> None:
    names = {path.stem for path in EXAMPLES}
    assert {"mercury", "adagp", "sparsetrain", "all-techniques", "quick-start"} <= names


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_expands(path: Path) -> None:
    spec = ExperimentSpec.model_validate(yaml.safe_load(path.read_text()))
    expansion = expand(spec, max_runs=5000)
    techniques = {plan.technique for plan in expansion.trainings.values()}
    assert "baseline" in techniques and len(techniques) >= 2
    assert all(run.params["technique"] in techniques for run in expansion.runs)
