"""Every example spec is valid and expands to runs, each technique with its baseline."""

from pathlib import Path

import pytest
import yaml

from backend.experiments.expand import expand
from backend.specs.experiment import ExperimentSpec

FOLDER = Path(__file__).resolve().parents[2] / "examples"
EXAMPLES = sorted(FOLDER.glob("**/*.yaml"))
PAPER_PRESETS = {
    "mercury": "mercury-like",
    "adagp": "adagp-like",
    "sparsetrain": "sparsetrain-like",
}


def test_there_are_examples_for_each_paper() -> None:
    names = {str(path.relative_to(FOLDER).with_suffix("")) for path in EXAMPLES}
    assert {"all-techniques", "quick-start"} <= names
    for paper in PAPER_PRESETS:
        assert {f"papers/{paper}", f"papers/full/{paper}"} <= names


@pytest.mark.parametrize("paper", list(PAPER_PRESETS))
def test_paper_miniatures_state_every_knob_and_use_the_papers_preset(paper: str) -> None:
    """Nothing a miniature depends on is left to a default that could change under it."""
    from pydantic import TypeAdapter

    from backend.specs.recipes import RECIPE_FIELDS
    from backend.specs.techniques import TechniqueParams

    full = sorted((FOLDER / "papers" / "full").glob(f"{paper}*.yaml"))
    assert FOLDER / "papers" / "full" / f"{paper}.yaml" in full
    full_techniques = []
    for path in [FOLDER / "papers" / f"{paper}.yaml", *full]:
        data = yaml.safe_load(path.read_text())
        assert data["accelerators"][0] == PAPER_PRESETS[paper]
        assert len(data["seeds"]) >= 3
        assert set(RECIPE_FIELDS) <= set(data["training"])
        (technique,) = data["techniques"]
        knobs = TypeAdapter(TechniqueParams).validate_python(technique).model_dump()
        assert set(knobs) == set(technique)
        if path in full:
            assert data["training"]["epochs"] >= 10, path.name
            full_techniques.append(data["techniques"])
    # one paper's --full files differ in the model only: the technique's knobs are the same
    assert all(t == full_techniques[0] for t in full_techniques), paper


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_expands(path: Path) -> None:
    spec = ExperimentSpec.model_validate(yaml.safe_load(path.read_text()))
    expansion = expand(spec, max_runs=5000)
    techniques = {plan.technique for plan in expansion.trainings.values()}
    assert "baseline" in techniques and len(techniques) >= 2
    assert all(run.params["technique"] in techniques for run in expansion.runs)


@pytest.mark.parametrize("paper", list(PAPER_PRESETS))
def test_the_example_is_the_shipped_miniature(paper: str) -> None:
    """The papers page serves the file inside the package; examples/papers links to it, so
    there is one file to edit."""
    from backend.analysis.papers import PAPERS

    assert set(PAPERS) == set(PAPER_PRESETS)
    example = FOLDER / "papers" / f"{paper}.yaml"
    assert example.resolve() == PAPERS[paper].miniature.resolve()
