"""What each part of the service makes of the technique table, printed as JSON.

Run in a fresh interpreter (tests/test_techniques.py) that sees the toy technique's entry point
(tests.techniques.install_toy), as a deployment sees an installed package's. Everything up to
the worker's step runs without torch.
"""

from __future__ import annotations

import json
import sys
import tempfile
from typing import Any

from fastapi.testclient import TestClient
from pydantic import ValidationError

from backend.api.app import create_app
from backend.api.run_export import EXPORT_COLUMNS
from backend.experiments.expand import expand
from backend.settings import Settings
from backend.specs.accelerator import EXTENSIONS
from backend.specs.experiment import ExperimentSpec
from backend.specs.techniques import EPOCH_FIGURES, parse_techniques

TOY_SPEC: dict[str, Any] = {
    "name": "toy",
    "techniques": [{"name": "toy", "strength": 0.25}, [{"name": "toy"}, {"name": "mercury"}]],
    "accelerators": ["edge"],
    "sweep": {"parameters": {"toy.strength": {"values": [0.1, 0.9]}}},
}


def _api(observed: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as data_dir:
        # No lifespan and no database: both reads are public and answered from the table.
        client = TestClient(create_app(Settings(data_dir=data_dir)))
        schema = client.get("/api/openapi.json").json()
        observed["endpoint"] = client.get("/api/v1/techniques").json()
    components = schema["components"]["schemas"]
    single = components["ExperimentSpec"]["properties"]["techniques"]["items"]["oneOf"][0]
    observed["spec_schema_techniques"] = single["discriminator"]["mapping"]
    observed["components"] = sorted(components)
    observed["toy_knobs"] = sorted(components.get("ToyParams", {}).get("properties", {}))


def _specs(observed: dict[str, Any]) -> dict[str, Any]:
    expansion = expand(ExperimentSpec.model_validate(TOY_SPEC), max_runs=100)
    observed["runs"] = sorted(
        [
            run.params["technique"],
            run.params.get("toy.strength"),
            [name for name in EXTENSIONS if run.accelerator_config[name]["enabled"]],
        ]
        for run in expansion.runs
    )
    try:
        ExperimentSpec.model_validate({**TOY_SPEC, "techniques": [{"name": "toy", "strength": 2}]})
    except ValidationError as exc:
        observed["refused_knob"] = [".".join(map(str, e["loc"])) for e in exc.errors()]
    observed["export_columns"] = [c for c in EXPORT_COLUMNS if c.startswith("toy.")]
    observed["epoch_figures"] = [figure.key for figure in EPOCH_FIGURES]
    return next(t.technique_params for t in expansion.trainings.values() if t.technique == "toy")


def main() -> None:
    observed: dict[str, Any] = {}
    _api(observed)
    toy_params = _specs(observed)
    observed["torch_before_worker"] = "torch" in sys.modules
    from backend.training.registry import build_techniques

    built = build_techniques(parse_techniques(toy_params))
    observed["built"] = [f"{type(t).__module__}:{type(t).__name__}" for t in built]
    observed["built_params"] = [t.params.model_dump() for t in built]  # type: ignore[attr-defined]
    print(json.dumps(observed))


if __name__ == "__main__":
    main()
