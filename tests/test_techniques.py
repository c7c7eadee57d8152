"""The technique table: a technique defined once is offered by the API schema, the technique
endpoint the form reads, the spec models, the expansion, the export and the worker; the API
imports no torch.

The table closes when it loads (the spec models are built from it), so a technique is added the
way a deployment adds one: a module named by ORRERY_TECHNIQUE_MODULES registers it, and a fresh
interpreter loads the service (tests/techniques/probe.py) and reports what each part made of it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pydantic import BaseModel

from backend.specs.accelerator import PRESETS
from backend.specs.techniques import (
    TECHNIQUE_NAMES,
    TECHNIQUES,
    TechniqueEntry,
    accelerator_for,
    extensions_for,
    register,
)
from backend.specs.training import MercuryParams
from tests.conftest import ROOT, orrery_env, repo_pythonpath


def _python(code_or_module: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *code_or_module],
        cwd=ROOT,
        env=orrery_env(PYTHONPATH=repo_pythonpath(), **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_api_imports_no_torch() -> None:
    check = "import sys, backend.api.app; print(sorted(m for m in sys.modules if 'torch' in m))"
    done = _python(["-c", check])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def toy() -> dict[str, Any]:
    done = _python(
        ["-m", "tests.techniques.probe"], ORRERY_TECHNIQUE_MODULES="tests.techniques.toy"
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_registered_technique_is_in_the_api_schema_and_the_endpoint(toy: dict[str, Any]) -> None:
    assert toy["spec_schema_techniques"]["toy"] == "#/components/schemas/ToyParams"
    assert toy["toy_knobs"] == ["name", "strength"]
    assert [t["name"] for t in toy["endpoint"]] == [*TECHNIQUE_NAMES, "toy"]
    assert toy["endpoint"][-1] == {
        "name": "toy",
        "label": "Toy",
        "params_schema": "ToyParams",
        "hardware_extension": "gradient_predictor",
    }
    assert all(t["params_schema"] in toy["components"] for t in toy["endpoint"])


def test_a_registered_technique_validates_sweeps_expands_and_exports(toy: dict[str, Any]) -> None:
    assert toy["refused_knob"] == ["techniques.0.technique.toy.strength"]
    # The sweep reaches the toy's knob; its runs switch on its extension, composed ones both.
    assert toy["runs"] == [
        ["baseline", None, []],
        ["mercury+toy", 0.1, ["mcache", "gradient_predictor"]],
        ["mercury+toy", 0.9, ["mcache", "gradient_predictor"]],
        ["toy", 0.1, ["gradient_predictor"]],
        ["toy", 0.9, ["gradient_predictor"]],
    ]
    assert toy["export_columns"] == ["toy.strength"]


def test_the_worker_builds_a_registered_technique_by_its_import_path(toy: dict[str, Any]) -> None:
    assert toy["torch_before_worker"] is False
    assert toy["built"] == ["tests.techniques.toy_training:Toy"]
    assert toy["built_params"] == [{"name": "toy", "strength": 0.1}]


def test_the_built_in_table() -> None:
    assert TECHNIQUE_NAMES == ("baseline", "mercury", "adagp", "sparsetrain")
    assert {t.name: t.hardware_extension for t in TECHNIQUES} == {
        "baseline": None,
        "mercury": "mcache",
        "adagp": "gradient_predictor",
        "sparsetrain": "zero_skipping",
    }
    assert extensions_for({"mercury", "sparsetrain", "baseline"}) == {"mcache", "zero_skipping"}
    assert accelerator_for(PRESETS["edge"], {"adagp"}).extensions_on == ("gradient_predictor",)


class _LateParams(BaseModel):
    name: str = "late"


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (TechniqueEntry("a+b", "A", _LateParams, "m:C"), "must match"),
        (TechniqueEntry("mercury", "M", MercuryParams, "m:C"), "registered twice"),
        (TechniqueEntry("other", "O", _LateParams, "m:C"), "needs the field name"),
        (TechniqueEntry("late", "L", _LateParams, "worker.training.late"), "not 'module:Class'"),
        (TechniqueEntry("late", "L", _LateParams, "m:C", "warp_drive"), "warp_drive"),
    ],
)
def test_an_entry_that_does_not_hold_together_is_refused(
    entry: TechniqueEntry, reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        register(entry)


def test_registering_after_the_table_loaded_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="ORRERY_TECHNIQUE_MODULES"):
        register(TechniqueEntry("late", "Late", _LateParams, "m:C"))
    assert "late" not in TECHNIQUE_NAMES


def test_a_technique_module_that_cannot_be_imported_is_named() -> None:
    done = _python(["-c", "import backend.specs.techniques"], ORRERY_TECHNIQUE_MODULES="no.such")
    assert done.returncode != 0
    assert "ORRERY_TECHNIQUE_MODULES names 'no.such'" in done.stderr
