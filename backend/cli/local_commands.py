"""The commands that compute on this machine, needing neither a server nor a database:
`orrery simulate`.

Model: the command validates its options into the same specs an experiment uses
(backend/specs), builds the dense workload of one training step and runs the simulator
(backend/sim) in-process, printing its per-layer table. Open choice: the science modules are
imported inside the command, so the other commands start without loading PyTorch.
"""

from __future__ import annotations

from typing import Annotated

import typer
from pydantic import ValidationError

from backend.cli.output import console, fail
from backend.specs.accelerator import PRESETS
from backend.specs.techniques import accelerator_for, techniques_of
from backend.specs.training import MODEL_NAMES, TrainingConfig


def simulate(
    model: Annotated[str, typer.Argument(help=f"model: {', '.join(MODEL_NAMES)}")],
    accel: Annotated[
        str, typer.Option(help=f"accelerator preset: {', '.join(PRESETS)}")
    ] = "tpu-like",
    dataset: Annotated[str, typer.Option(help="data set whose input shape to use")] = "mnist",
    batch_size: Annotated[int, typer.Option(help="mini-batch size")] = 64,
    width: Annotated[int, typer.Option(help="base channel width")] = 16,
) -> None:
    """Simulate one dense training step of a zoo model on a preset; print a per-layer table.

    Like an experiment's baseline run, the step runs on the preset with only the extensions its
    techniques use switched on (a dense step uses none); the output says which were on."""
    if accel not in PRESETS:
        fail(f"--accel: unknown preset '{accel}'; choose one of {', '.join(PRESETS)}")
    try:
        config = TrainingConfig(model=model, dataset=dataset, batch_size=batch_size, width=width)
    except ValidationError as exc:
        error = exc.errors()[0]
        fail(f"{'.'.join(str(p) for p in error['loc']) or 'spec'}: {error['msg']}")
    from backend.sim import simulate as run_simulation
    from backend.sim.report import extensions_line, layer_table
    from backend.training import dense_workload

    workload = dense_workload(config)
    hardware = accelerator_for(PRESETS[accel], techniques_of(workload.technique))
    result = run_simulation(workload, hardware)
    console.print(layer_table(result))
    offered = ", ".join(PRESETS[accel].extensions_on) or "none"
    console.print(
        f"{extensions_line(result)}; {accel} offers: {offered} (a run switches on those its "
        "techniques use; a dense step, like an experiment's baseline, uses none)"
    )
    console.print(f"convolution operand traffic: {result.conv_operand_traffic}")
    for note in result.notes:
        console.print(f"note: {note}")
