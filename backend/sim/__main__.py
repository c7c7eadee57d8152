"""The simulator on its own: a stored workload and an accelerator in, the report out.

    python -m backend.sim WORKLOAD ACCELERATOR [--json]
    python -m backend.sim examples/workloads/lenet5-digits-baseline.workload.json.xz edge

WORKLOAD is a recorded workload (NAME.workload.json.xz, backend.sim.recorded: the workload with
its training's config, epochs and provenance; examples/workloads/ ships one) or a JSON file of a
workload in the form Workload.to_dict writes (a training's stored workload). ACCELERATOR is a
preset name (backend.specs.accelerator.PRESETS) or a YAML or JSON file holding an
AcceleratorConfig's fields (left-out fields take their defaults). The accelerator is taken
literally, with the extensions it has switched on, as the simulator core takes it (an
experiment's run instead switches on only those its techniques use); the report says which were
on. The output is the per-layer table of backend.sim.report and the accelerator's area
(backend.sim.area), or with --json the SimulationResult as JSON. A file that is missing or
unreadable, or does not hold a workload or a valid accelerator, ends the program with a one-line
message and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from rich.console import Console

from backend.sim.area import area
from backend.sim.recorded import NotAWorkload, decompressed, stored_workload
from backend.sim.report import layer_table
from backend.sim.simulate import simulate
from backend.sim.workload import Workload
from backend.specs.accelerator import PRESETS, AcceleratorConfig

PROG = "python -m backend.sim"
PIPED_WIDTH = 200  # columns of the table when the output is not a terminal and COLUMNS is unset


class InputError(Exception):
    """An input file or argument that cannot be used, said in one line."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Simulate a stored training workload on one accelerator and print the report.",
    )
    parser.add_argument(
        "workload",
        metavar="WORKLOAD",
        help="a recorded workload (.workload.json.xz) or a stored workload (JSON)",
    )
    parser.add_argument(
        "accelerator",
        metavar="ACCELERATOR",
        help=f"a preset ({', '.join(PRESETS)}) or a YAML/JSON file of accelerator fields",
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    args = parser.parse_args(argv)
    try:
        workload = load_workload(Path(args.workload))
        accelerator = load_accelerator(args.accelerator)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    result = simulate(workload, accelerator)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    console = Console(width=PIPED_WIDTH if piped else None)
    console.print(layer_table(result))
    console.print(
        f"area: {area(accelerator).area_mm2:.4g} mm² at 45 nm (backend.sim.area; an MCACHE "
        "sized by MERCURY's default parameters)"
    )
    console.print(f"convolution operand traffic: {result.conv_operand_traffic}")
    for note in result.notes:
        console.print(f"note: {note}")
    return 0


def load_workload(path: Path) -> Workload:
    data = _parsed(path, lambda raw: json.loads(decompressed(raw)), "JSON")
    try:
        return stored_workload(data)
    except NotAWorkload as exc:
        raise InputError(f"{path}: {exc}") from exc


def load_accelerator(choice: str) -> AcceleratorConfig:
    if choice in PRESETS:
        return PRESETS[choice]
    path = Path(choice)
    if not path.exists():
        raise InputError(
            f"accelerator '{choice}' is neither a preset ({', '.join(PRESETS)}) nor a file"
        )
    data = _parsed(path, yaml.safe_load, "YAML or JSON")
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: expected a mapping of accelerator fields, found {type(data).__name__}"
        )
    try:
        return AcceleratorConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'accelerator'}: {error['msg']}"
            for error in exc.errors()
        )
        raise InputError(f"{path}: invalid accelerator: {problems}") from exc


def _parsed(path: Path, parse: Callable[[bytes], Any], language: str) -> Any:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError(f"{path}: no such file") from exc
    except OSError as exc:
        raise InputError(f"{path}: cannot read it: {exc}") from exc
    try:
        return parse(raw)
    except lzma.LZMAError as exc:
        raise InputError(f"{path}: a broken xz stream: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}: not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid {language}: {_yaml_problem(exc)}") from exc


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or " ".join(str(exc).split())
    return f"{problem} (line {mark.line + 1}, column {mark.column + 1})" if mark else problem


if __name__ == "__main__":
    sys.exit(main())
