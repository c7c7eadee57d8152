"""The technique table: a technique defined once is offered by the API schema, the technique
endpoint the form reads, the spec models, the expansion, the export and the worker; the API
imports no torch.

The table is built once, from the entry points of the group `orrery.techniques` (the spec models
are built from it), so a technique is added the way a package adds one: a distribution's
metadata declares the toy's entry point (tests.techniques.install_toy), and a fresh interpreter
that sees it loads the service (tests/techniques/probe.py) and reports what each part made of it.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from backend.specs.accelerator import PRESETS
from backend.specs.techniques import (
    EPOCH_FIGURES,
    TECHNIQUE_NAMES,
    TECHNIQUES,
    TechniqueEntry,
    accelerator_for,
    extensions_for,
    load_entries,
)
from backend.techniques.baseline import TECHNIQUE as BASELINE_ENTRY
from backend.techniques.entry import Figure
from backend.techniques.mercury import TECHNIQUE as MERCURY_ENTRY
from tests.conftest import ROOT, orrery_env, repo_pythonpath
from tests.techniques import install_toy


def _python(
    code_or_module: list[str], extra_path: Path | None = None
) -> subprocess.CompletedProcess[str]:
    path = (
        repo_pythonpath() if extra_path is None else f"{extra_path}{os.pathsep}{repo_pythonpath()}"
    )
    return subprocess.run(
        [sys.executable, *code_or_module],
        cwd=ROOT,
        env=orrery_env(PYTHONPATH=path),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _quoted_names(source: str) -> list[tuple[int, str]]:
    """(line, name) of each string literal that is a technique's name, or a composition of
    names, in this Python source."""
    names = set(TECHNIQUE_NAMES) - {"baseline"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts = node.value.split("+")
            if all(part in names for part in parts):
                found.append((node.lineno, node.value))
    return found


def test_a_technique_is_named_in_product_code_only_in_its_own_folder() -> None:
    assert sorted(
        _quoted_names('x = {"mercury": 1}; y = "a mercury"; z = "adagp+sparsetrain"')
    ) == [
        (1, "adagp+sparsetrain"),
        (1, "mercury"),
    ]
    outside = []
    for folder in ("backend", "worker"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            relative = path.relative_to(ROOT)
            for line, name in _quoted_names(path.read_text()):
                home = Path("backend/techniques", name)
                if "+" in name or not relative.is_relative_to(home):
                    outside.append(f"{relative}:{line} '{name}'")
    assert outside == []


def test_the_api_imports_no_torch() -> None:
    check = "import sys, backend.api.app; print(sorted(m for m in sys.modules if 'torch' in m))"
    done = _python(["-c", check])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    done = _python(["-m", "tests.techniques.probe"], install_toy(tmp_path_factory.mktemp("site")))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_registered_technique_is_in_the_api_schema_and_the_endpoint(toy: dict[str, Any]) -> None:
    assert toy["spec_schema_techniques"]["toy"] == "#/components/schemas/ToyParams"
    assert toy["toy_knobs"] == ["name", "strength"]
    assert [t["name"] for t in toy["endpoint"]] == [*TECHNIQUE_NAMES, "toy"]  # by name
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


def test_the_worker_builds_a_registered_technique_with_its_hook(toy: dict[str, Any]) -> None:
    assert toy["torch_before_worker"] is False
    assert toy["built"] == ["tests.techniques.toy.training:Toy"]
    assert toy["built_params"] == [{"name": "toy", "strength": 0.1}]


def test_a_registered_technique_declares_its_figures(toy: dict[str, Any]) -> None:
    assert toy["epoch_figures"][-1] == "toy_level"
    assert toy["epoch_figures"][:-1] == [figure.key for figure in EPOCH_FIGURES]


def test_the_built_in_table() -> None:
    assert TECHNIQUE_NAMES == ("baseline", "adagp", "mercury", "sparsetrain")
    assert {t.name: t.hardware_extension for t in TECHNIQUES} == {
        "baseline": None,
        "mercury": "mcache",
        "adagp": "gradient_predictor",
        "sparsetrain": "zero_skipping",
    }
    assert extensions_for({"mercury", "sparsetrain", "baseline"}) == {"mcache", "zero_skipping"}
    assert accelerator_for(PRESETS["edge"], {"adagp"}).extensions_on == ("gradient_predictor",)


class _OtherParams(BaseModel):
    name: str = "other"


def _hook() -> type:
    return object


class _Point:
    """What load_entries reads of an importlib.metadata.EntryPoint."""

    def __init__(self, name: str, value: object) -> None:
        self.name, self.value, self._value = name, "some.module:TECHNIQUE", value

    def load(self) -> object:
        if isinstance(self._value, Exception):
            raise self._value
        return self._value


def _entry(name: str, params: type[BaseModel] = _OtherParams, **more: Any) -> TechniqueEntry:
    return TechniqueEntry(name, name.title(), params, _hook, **more)


@pytest.mark.parametrize(
    ("points", "reason"),
    [
        ([_Point("a+b", _entry("a+b"))], "must match"),
        ([_Point("mercury", MERCURY_ENTRY), _Point("mercury", MERCURY_ENTRY)], "twice"),
        ([_Point("late", _entry("late"))], "needs the field name"),
        ([_Point("other", _entry("other", hardware_extension="warp_drive"))], "warp_drive"),
        (
            [
                _Point("mercury", MERCURY_ENTRY),
                _Point("other", _entry("other", figures=(Figure("hit_rate", "h", "again"),))),
            ],
            "declares figure 'hit_rate' again",
        ),
        ([_Point("other", _entry("other", figures=(Figure("density_bwd", "d", "x"),)))], "again"),
        ([_Point("other", MERCURY_ENTRY)], "names technique 'mercury'"),
        ([_Point("other", "not an entry")], "names no TechniqueEntry"),
        ([_Point("other", ModuleNotFoundError("no module 'x'"))], "does not load: no module"),
    ],
)
def test_an_entry_point_that_does_not_hold_together_is_named(
    points: list[_Point], reason: str
) -> None:
    with pytest.raises((ValueError, ImportError), match=reason):
        load_entries([_Point("baseline", BASELINE_ENTRY), *points])  # type: ignore[list-item]


def test_the_table_needs_the_baseline_and_sorts_the_rest_by_name() -> None:
    with pytest.raises(ValueError, match="no 'baseline' technique"):
        load_entries([_Point("mercury", MERCURY_ENTRY)])  # type: ignore[list-item]
    loaded = load_entries(
        [_Point("mercury", MERCURY_ENTRY), _Point("baseline", BASELINE_ENTRY)]  # type: ignore[list-item]
    )
    assert [entry.name for entry in loaded] == ["baseline", "mercury"]


def test_a_technique_entry_point_that_cannot_be_imported_is_named(tmp_path: Path) -> None:
    site = install_toy(tmp_path, value="no.such.module:TECHNIQUE")
    done = _python(["-c", "import backend.specs.techniques"], site)
    assert done.returncode != 0
    assert "technique entry point 'toy = no.such.module:TECHNIQUE' does not load" in done.stderr
