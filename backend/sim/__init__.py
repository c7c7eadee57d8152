"""Accelerator simulator core: a training workload's GEMMs in, cycles, traffic and energy out."""

from backend.sim.results import LayerPassResult, SimulationResult, TrainingTotals
from backend.sim.simulate import simulate, simulate_many
from backend.sim.workload import GemmOp, TrainingPass, Workload

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
