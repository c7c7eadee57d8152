"""Ranges (start/stop/step) with astronomically many values: refused with a 422 naming the field
and the limit, by every endpoint that takes one, storing nothing; and, as a property over any
range triple, a range either has a count that is safe to compute and list, or is refused by
validation (never an OverflowError or any other exception).
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from sqlalchemy import func, select

from backend.db.models import DesignSearchRow, Experiment
from backend.db.session import session_scope
from backend.settings import Settings
from backend.specs.axes import MAX_RANGE_VALUES, SweepAxis
from backend.specs.design_search import DesignSearch
from backend.specs.experiment import ExperimentSpec
from tests.pipeline.conftest import TINY_TRAINING

ASTRONOMICAL = [
    {"start": 0, "stop": 1e308, "step": 5e-324},
    {"start": -1e308, "stop": 1e308, "step": 1},
]
LIMIT = f"at most {MAX_RANGE_VALUES:,}"
SPEC: dict[str, Any] = {
    "name": "ranges",
    "training": TINY_TRAINING,
    "techniques": [{"name": "sparsetrain", "prune_rate": 0.9}],
    "accelerators": ["edge"],
}

any_float = st.floats(allow_nan=True, allow_infinity=True)


@settings(max_examples=400, deadline=None, database=None, derandomize=True)
@given(start=any_float, stop=any_float, step=any_float)
def test_any_range_triple_is_counted_or_refused(start: float, stop: float, step: float) -> None:
    triple = {"start": start, "stop": stop, "step": step}
    try:
        axis = SweepAxis.model_validate(triple)
    except ValidationError:
        refused = True
    else:
        refused = False
        count = axis.value_count()
        assert 1 <= count <= MAX_RANGE_VALUES
        if count <= 10_000:
            values = axis.finite_values()
            assert len(values) == count
            assert values[0] == round(start, 12)
    # The same triple in a design search and an experiment's sweep: accepted or refused by
    # validation, nothing else.
    for model, body in (
        (DesignSearch, {"base": "edge", "mode": "grid", "parameters": {"clock_mhz": triple}}),
        (ExperimentSpec, {**SPEC, "sweep": {"parameters": {"accelerator.clock_mhz": triple}}}),
    ):
        try:
            model.model_validate(body)
        except ValidationError:
            continue
        assert not refused, (model, triple)


@pytest.mark.parametrize("triple", ASTRONOMICAL)
def test_the_axis_names_the_limit(triple: dict[str, float]) -> None:
    with pytest.raises(ValidationError, match=LIMIT):
        SweepAxis.model_validate(triple)


def stored(url: str) -> tuple[int, int]:
    with session_scope(url) as db:
        return (
            db.scalar(select(func.count()).select_from(Experiment)) or 0,
            db.scalar(select(func.count()).select_from(DesignSearchRow)) or 0,
        )


@pytest.mark.parametrize("triple", ASTRONOMICAL)
def test_every_endpoint_refuses_an_astronomical_range(
    api: TestClient, pg_settings: Settings, triple: dict[str, float]
) -> None:
    url = pg_settings.effective_database_url
    experiment = api.post("/api/v1/experiments", json=SPEC)
    assert experiment.status_code == 201, experiment.text
    before = stored(url)
    swept = {**SPEC, "sweep": {"parameters": {"accelerator.clock_mhz": triple}}}
    search = {"base": "edge", "mode": "grid", "parameters": {"clock_mhz": triple}}
    attempts = [
        ("/api/v1/experiments/preview", swept, ["body", "sweep", "parameters"]),
        ("/api/v1/experiments", swept, ["body", "sweep", "parameters"]),
        (
            "/api/v1/experiments",
            {**SPEC, "search": search},
            ["body", "search", "parameters"],
        ),
        (
            f"/api/v1/experiments/{experiment.json()['id']}/searches",
            search,
            ["body", "parameters"],
        ),
    ]
    for path, body, loc in attempts:
        refused = api.post(path, json=body)
        assert refused.status_code == 422, (path, refused.text)
        error = refused.json()["detail"][0]
        assert [str(part) for part in error["loc"]][: len(loc)] == loc, (path, error)
        assert "clock_mhz" in [str(part) for part in error["loc"]][len(loc)], (path, error)
        assert LIMIT in error["msg"] and "values" in error["msg"], (path, error)
    assert stored(url) == before
