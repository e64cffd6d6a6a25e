"""What NeMo's configured RNN-T loss asks of the sample-wise loss: its blank and clamp, or a refusal by name.

NeMo's ``RNNTLoss`` wraps one implementation chosen by ``model.loss.loss_name`` with its
``model.loss.<loss_name>_kwargs``. The sample-wise loss computes the plain RNN-T negative log-likelihood
(Graves 2012) with an optional gradient clamp, so:

- ``warprnnt_numba`` (NeMo's default), ``pytorch``, ``warprnnt`` and ``graph_rnnt`` compute that objective;
  their ``clamp`` is honoured (see below) and ``fastemit_lambda`` other than 0 is refused (FastEmit changes the
  gradients of label emissions, which the sample-wise kernels do not implement);
- ``tdt``, ``tdt_pytorch``, ``multiblank_rnnt``, ``multiblank_rnnt_pytorch`` and ``graph_w_transducer`` are other
  objectives and are refused, as is a joint with extra (duration or big-blank) outputs.

Clamp: each element of a sample's logits gradient is clamped to [-clamp, clamp] before the reduction's weight
multiplies it, which is what NeMo's CUDA kernels do; NeMo's CPU path clamps after the weight (and after its
explicit log-softmax), so on the CPU the two agree only for ``rnnt_reduction: sum`` with
``joint.log_softmax: false``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nemo.collections.asr.losses.rnnt import RNNTLoss
from nemo.collections.asr.losses.rnnt_pytorch import RNNTLossPytorch
from nemo.collections.asr.modules import RNNTJoint

# Implementations of other objectives, by the loss_name that selects them.
_OTHER_OBJECTIVES = {
    "TDTLossNumba": "tdt",
    "TDTLossPytorch": "tdt_pytorch",
    "MultiblankRNNTLossNumba": "multiblank_rnnt",
    "MultiblankRNNTLossPytorch": "multiblank_rnnt_pytorch",
    "GraphWTransducerLoss": "graph_w_transducer",
}
# Plain RNN-T implementations NeMo imports only when their library is installed: (module prefix, class name).
_OPTIONAL_RNNT = {("warprnnt_pytorch", "RNNTLoss"): "warprnnt", ("nemo.collections.asr.parts.k2", "GraphRnntLoss"): "graph_rnnt"}


@dataclass(frozen=True)
class LossSettings:
    """The sample-wise loss's arguments that NeMo's loss determines."""

    blank: int  # NeMo's blank: the last of the joint's outputs
    clamp: float | None  # None: no clamping


def _loss_name(implementation) -> str | None:
    """The loss_name of a plain RNN-T implementation, else None."""
    try:
        from nemo.collections.asr.parts.numba.rnnt_loss import RNNTLossNumba
    except ImportError:  # numba missing: NeMo cannot build that loss either
        RNNTLossNumba = ()
    if isinstance(implementation, RNNTLossNumba):
        return "warprnnt_numba"
    if type(implementation) is RNNTLossPytorch:
        return "pytorch"
    kind = type(implementation)
    for (module, name), loss_name in _OPTIONAL_RNNT.items():
        if kind.__name__ == name and kind.__module__.startswith(module):
            return loss_name
    return None


def loss_settings(loss: RNNTLoss, joint: RNNTJoint) -> LossSettings:
    """Blank and clamp for NeMo's `loss` on `joint`'s outputs; ValueError naming the config key of anything the
    sample-wise loss does not compute."""
    if not isinstance(loss, RNNTLoss):
        raise ValueError(
            f"the model's loss is {type(loss).__name__}, not NeMo's RNNTLoss: the sample-wise joint computes the "
            "RNN-T loss that EncDecRNNTModel sets on its joint"
        )
    if joint.num_extra_outputs:
        raise ValueError(
            f"joint.num_extra_outputs = {joint.num_extra_outputs}: joints with duration (TDT) or big-blank outputs "
            "are not supported by the sample-wise joint yet; train this model with NeMo's RNNTJoint"
        )
    implementation = loss._loss  # NeMo keeps the resolved implementation here; no public accessor
    kind = type(implementation).__name__
    if kind in _OTHER_OBJECTIVES:
        raise ValueError(
            f"loss.loss_name = {_OTHER_OBJECTIVES[kind]!r} is not the plain RNN-T loss, which is the "
            "only objective the sample-wise joint computes (TDT follows with the sample-wise TDT loss); train "
            "this model with NeMo's RNNTJoint"
        )
    loss_name = _loss_name(implementation)
    if loss_name is None:
        raise ValueError(
            f"NeMo's loss implementation {type(implementation).__module__}.{kind} is unknown to the sample-wise "
            "joint, which cannot tell whether it computes the plain RNN-T loss; use loss.loss_name 'default' "
            "(warprnnt_numba) or 'pytorch'"
        )
    fastemit = float(getattr(implementation, "fastemit_lambda", 0.0) or 0.0)
    if fastemit != 0.0:
        raise ValueError(
            f"loss.{loss_name}_kwargs.fastemit_lambda = {fastemit}: FastEmit regularisation is not implemented "
            "by the sample-wise loss; set it to 0.0 or train with NeMo's RNNTJoint"
        )
    blank = joint.num_classes_with_blank - 1
    if getattr(implementation, "blank", blank) != blank:
        raise ValueError(
            f"NeMo's loss has blank = {implementation.blank} but the joint's blank (its last output) is {blank}"
        )
    clamp = float(getattr(implementation, "clamp", 0.0) or 0.0)
    return LossSettings(blank=blank, clamp=clamp if clamp > 0 else None)
