"""Accelerator simulator core: a training workload's GEMMs in, cycles, traffic and energy out."""

from worker.sim.results import LayerPassResult, SimulationResult, TrainingTotals
from worker.sim.simulate import simulate, simulate_many
from worker.sim.workload import GemmOp, TrainingPass, Workload

__all__ = [
    "GemmOp",
    "LayerPassResult",
    "SimulationResult",
    "TrainingPass",
    "TrainingTotals",
    "Workload",
    "simulate",
    "simulate_many",
]
