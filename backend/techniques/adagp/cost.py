"""What ADA-GP's workload charges (`annotate_workload`):

- the recorder counts FWD on every batch and BWD-DATA / BWD-WEIGHT on BP batches only, so GP
  batches' backward passes are skipped MACs;
- `feedback`: on GP batches the dW = dy_pred x^T product ran, so the layer's BWD-WEIGHT compute
  GEMM gets those executions too (its operand density becomes the execution-weighted mean of the
  measured true-gradient density and 1.0 for the dense predicted gradient); on BP batches the
  same product is formed to measure the cosine, an overhead GEMM on the array; the predictor's
  GEMMs run on the predictor unit: e B_l (FWD, every batch: the prediction is formed on GP
  batches and for training on BP batches) and its weight gradient (BWD-WEIGHT, BP batches); the
  gate's elementwise work and the BatchNorm projection are extra ops, and so is the training
  step's (`training_ops`: the residual, the gate's derivative, the sums for a and c and, for a
  layer feeding a BatchNorm, the residual's projection);
- every predictor: the reference on every BP batch is three dot products over the layer's
  weights (a predictor-unit GEMM m=1, k=weights, n=3) plus a copy of the true gradient kept
  for the next one (`result_copies`); the predicted cosine two more (n=2) on the measured
  batches; the weight update of GP batches (the recorder charges BP batches' only) and the
  `history` running-mean refresh are `weight_updates` extra ops.
  The predictors' Adam step is charged as four `weight_updates` per predictor parameter per BP
  batch. The output error needs no extra work: its softmax is the loss's own.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from worker.sim.workload import GemmOp, TrainingPass
from worker.training.technique import WorkloadOps, add_extra

if TYPE_CHECKING:
    from backend.techniques.adagp.layer_state import LayerState

# BatchNorm projection per output element: centring y, the three per-channel sums (y^2, dy,
# dy y), the multiply-add and the subtraction
PROJECTION_OPS = 9
# the predictor's training step per output element (`FeedbackPredictor.set_gradients`,
# predictors.py): the residual (a multiply-add and a scaling), its product with the gate, the
# gate's derivative (1 - gate, two products), the two per-channel sums for a and c (a
# multiply-add and an add); a layer feeding a BatchNorm also projects the residual (two sums, a
# subtraction, a multiply-add)
TRAINING_OPS = 10
PROJECTION_BACKWARD_OPS = 6


def annotate_workload(
    ops: WorkloadOps,
    predictor: str,
    states: dict[str, LayerState],
    gp: int,
    bp: int,
    predictor_trainings: int,
) -> None:
    """Charge the training's `gp` GP and `bp` BP batches (`feedback` predictors trained on
    `predictor_trainings` of the BP batches) on `ops`; see the module docstring."""
    for name, state in states.items():
        size = state.weight.numel()
        weights = size + (state.bias.numel() if state.bias is not None else 0)
        reference = _overhead(
            f"{name}.predictor.reference", TrainingPass.FWD, (1, size, 3),
            state.reference_measurements,
        )  # fmt: skip
        cosine = _overhead(
            f"{name}.predictor.cosine", TrainingPass.FWD, (1, size, 2),
            state.predicted_measurements,
        )  # fmt: skip
        # the copy of the true gradient kept for the reference, a word write per weight
        add_extra(reference, "result_copies", bp * size)
        update = ops.find(name, TrainingPass.FWD)  # GP batches' weight updates
        if update is not None:
            add_extra(update, "weight_updates", gp * weights)
        if predictor == "history":  # the running-mean refresh
            add_extra(reference, "weight_updates", bp * weights)
        for op in (reference, cosine):
            if op.executions:
                ops.add(op)
        if predictor == "feedback" and state.feedback is not None:
            _annotate_feedback(ops, name, state, gp, bp, predictor_trainings)


def _annotate_feedback(
    ops: WorkloadOps, name: str, state: LayerState, gp: int, bp: int, trainings: int
) -> None:
    assert state.feedback is not None
    classes, per_sample = state.feedback.projection.shape
    batches = gp + bp
    batch = state.output_elements // max(per_sample, 1) // max(batches, 1)
    formed = gp + trainings  # dy_pred = e B on these batches
    project = _overhead(
        f"{name}.predictor.feedback", TrainingPass.FWD, (batch, classes, per_sample), formed
    )
    # the gate: a multiply-add, a sigmoid and a multiply per output element
    add_extra(project, "gate_ops", 4 * state.output_elements * formed / max(batches, 1))
    if state.normalization is not None:
        add_extra(
            project,
            "projection_ops",
            PROJECTION_OPS * state.output_elements * formed / max(batches, 1),
        )
    train = _overhead(
        f"{name}.predictor.feedback", TrainingPass.BWD_WEIGHT,
        (classes, batch, per_sample), trainings,
    )  # fmt: skip
    adam = 4 * sum(p.numel() for p in state.feedback.parameters())
    add_extra(train, "weight_updates", adam * trainings)
    per_element = TRAINING_OPS + (PROJECTION_BACKWARD_OPS if state.normalization is not None else 0)
    trained_elements = state.output_elements * trainings / max(batches, 1)
    add_extra(train, "training_ops", per_element * trained_elements)
    for op in (project, train):
        if op.executions:
            ops.add(op)
    weight = ops.find(name, TrainingPass.BWD_WEIGHT)
    if weight is None:
        return
    measured = state.weight_formations
    if measured:  # dW_pred formed on BP batches to measure its cosine, on the array
        ops.add(replace(
            weight, layer=f"{name}.predictor.measure", executions=measured, role="overhead",
            density_a=1.0, a_row_nnz=None, extra_ops={},
        ))  # fmt: skip
    if gp:  # GP batches formed dW = dy_pred x^T with the layer's own GEMM
        true_runs = weight.executions
        weight.density_a = (true_runs * weight.density_a + gp) / (true_runs + gp)
        weight.a_row_nnz = None
        weight.executions = true_runs + gp


def _overhead(layer: str, pass_: TrainingPass, shape: tuple[int, int, int], runs: int) -> GemmOp:
    m, k, n = shape
    return GemmOp(
        layer=layer,
        pass_=pass_,
        m=m,
        k=k,
        n=n,
        executions=runs,
        role="overhead",
        runs_on="predictor",
    )
