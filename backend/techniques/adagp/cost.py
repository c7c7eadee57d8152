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
- `direct` (direct.py): GP batches run no backward GEMM at all (neither BWD-DATA nor
  BWD-WEIGHT: the recorder counts both on BP batches only) and no dW product on the array. With
  K output channels, F = `direct_features`, H = `direct_hidden`, O = C·R·S (+1 with a bias) and
  P = C·R·S, the predictor's GEMMs run on the predictor unit: on every batch its forward,
  `<layer>.predictor.direct.hidden` FWD (K, F [+P with the filter input], H) and
  `<layer>.predictor.direct.out` FWD (K, H, O) (GP batches: the prediction; BP batches: the
  prediction its training and the cosine need); on the BP batches it trains on, its backward,
  `.out` BWD-WEIGHT (H, K, O), `.out` BWD-DATA (K, O, H) and `.hidden` BWD-WEIGHT (F [+P], K,
  H), its Adam step (4 `weight_updates` per predictor parameter) and `training_ops` (the
  target's RMS, its scaling, the residual: 5 per output value; the ReLU's derivative: 1 per
  hidden value). Extra ops on every batch: the pooled statistics (`pooling_ops`: 3 per output
  element of the layer: the sum, the squared sum and the map's batch mean; linear layers' sort
  is not charged), charged on the layer's own FWD GEMM because they are reductions over the
  output as it leaves the array (as SparseTrain's mean |g| is), so the column units overlap them
  with the array; the hidden layer's bias, embedding and ReLU (`activation_ops`, 3 per hidden
  value); on GP batches the running scale and the calibrated gain (`scale_ops`, 3 per
  predicted value: two products and the norm's square-add). DRAM: the workload has no term for
  the activations a training keeps for backward; a GP batch's saving appears only as the
  skipped backward GEMMs' operand traffic (they read x and dy), not as avoided activation writes
  in FWD (FWD writes its output for the next layer either way).
- `oracle` (a control): its GP batches ran a backward pass for their true gradients, which the
  recorder counted; it is taken back out (`gp` executions of every BWD-DATA and BWD-WEIGHT
  compute GEMM), so the oracle is charged exactly as the `none` control: a free, perfect
  predictor;
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

from backend.sim.workload import GemmOp, TrainingPass
from backend.training.technique import WorkloadOps, add_extra

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
# `direct` (direct.py): the pooled statistics per output element (sum, squared sum, the map's
# batch mean); the hidden layer's bias, embedding and ReLU per hidden value; the running scale
# and calibrated gain per predicted value on GP batches; the target's RMS, scaling and the
# residual per predicted value in training
POOLING_OPS = 3
ACTIVATION_OPS = 3
SCALE_OPS = 3
RESIDUAL_OPS = 5


def annotate_workload(
    ops: WorkloadOps,
    predictor: str,
    states: dict[str, LayerState],
    gp: int,
    bp: int,
    predictor_trainings: int,
    direct_trainings: int = 0,
) -> None:
    """Charge the training's `gp` GP and `bp` BP batches (`feedback` predictors trained on
    `predictor_trainings` of the BP batches, `direct` ones on `direct_trainings`) on `ops`; see
    the module docstring."""
    if predictor == "oracle":
        _uncharge_backward(ops, gp)
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
        if predictor == "direct" and state.direct is not None:
            _annotate_direct(ops, name, state, gp, bp, direct_trainings)


def _annotate_direct(
    ops: WorkloadOps, name: str, state: LayerState, gp: int, bp: int, trainings: int
) -> None:
    assert state.direct is not None
    predictor = state.direct.predictor
    channels, hidden = len(state.weight), predictor.hidden.out_features
    inputs = predictor.hidden.in_features + (
        predictor.filter.in_features if predictor.filter is not None else 0
    )
    outputs = predictor.out.out_features
    batches = gp + bp
    hidden_fwd = _overhead(
        f"{name}.predictor.direct.hidden", TrainingPass.FWD, (channels, inputs, hidden), batches
    )
    out_fwd = _overhead(
        f"{name}.predictor.direct.out", TrainingPass.FWD, (channels, hidden, outputs), batches
    )
    forward = ops.find(name, TrainingPass.FWD)
    if forward is not None:
        add_extra(forward, "pooling_ops", POOLING_OPS * state.output_elements)
    add_extra(hidden_fwd, "activation_ops", ACTIVATION_OPS * channels * hidden * batches)
    add_extra(out_fwd, "scale_ops", SCALE_OPS * channels * outputs * gp)
    out_weight = _overhead(
        f"{name}.predictor.direct.out", TrainingPass.BWD_WEIGHT, (hidden, channels, outputs),
        trainings,
    )  # fmt: skip
    out_data = _overhead(
        f"{name}.predictor.direct.out", TrainingPass.BWD_DATA, (channels, outputs, hidden),
        trainings,
    )  # fmt: skip
    hidden_weight = _overhead(
        f"{name}.predictor.direct.hidden", TrainingPass.BWD_WEIGHT, (inputs, channels, hidden),
        trainings,
    )  # fmt: skip
    add_extra(
        out_weight,
        "training_ops",
        (RESIDUAL_OPS * channels * outputs + channels * hidden) * trainings,
    )
    parameters = sum(p.numel() for p in predictor.parameters())
    add_extra(out_weight, "weight_updates", 4 * parameters * trainings)
    for op in (hidden_fwd, out_fwd, out_weight, out_data, hidden_weight):
        if op.executions:
            ops.add(op)


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


def _uncharge_backward(ops: WorkloadOps, gp: int) -> None:
    """The `oracle`'s GP batches as GP batches: the backward passes they ran for their true
    gradients are not charged."""
    for op in ops.ops:
        if op.role == "compute" and op.pass_ in (TrainingPass.BWD_DATA, TrainingPass.BWD_WEIGHT):
            assert op.executions >= gp, f"{op.layer} {op.pass_}: fewer backward passes than GP"
            op.executions -= gp


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
