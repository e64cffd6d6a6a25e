"""What NeMo's configured transducer loss asks of the sample-wise loss (blank, its lattice: RNN-T with clamp and
FastEmit or TDT with durations, sigma and clamp, and TDT's omega), or a refusal naming the setting it cannot
compute.

NeMo's ``RNNTLoss`` wraps one implementation chosen by ``model.loss.loss_name`` with its
``model.loss.<loss_name>_kwargs``. The sample-wise loss (``asr_plugin.losses``) computes the RNN-T negative
log-likelihood (Graves 2012) and the TDT one (Xu et al. 2023), with an optional gradient clamp and, for RNN-T,
FastEmit (Yu et al. 2021) as NeMo's numba loss defines it, so:

- ``warprnnt_numba`` (NeMo's default), ``pytorch``, ``warprnnt`` and ``graph_rnnt`` compute the RNN-T loss;
  ``tdt`` and ``tdt_pytorch`` the TDT loss with their ``durations``, ``sigma`` and ``omega`` (NeMo's joint then
  has one extra output per duration, after the token scores);
- ``clamp`` is honoured (see below), and so is ``fastemit_lambda`` of the RNN-T losses (``RNNT(fastemit_lambda=...)``:
  NeMo's numba definition, value and gradients); a TDT loss's ``fastemit_lambda`` other than 0 is refused (the
  TDT kernels have no FastEmit);
- ``multiblank_rnnt``, ``multiblank_rnnt_pytorch`` and ``graph_w_transducer`` are other objectives and are
  refused, as is an unknown implementation.

Blank is NeMo's: the last token score (``num_classes``), before any duration scores.

Clamp: each element of a sample's token-score gradient is clamped to [-clamp, clamp] before the reduction's
weight multiplies it, which is what NeMo's CUDA kernels do; NeMo's CPU path clamps after the weight (and after
its explicit log-softmax), so on the CPU the two agree only for ``rnnt_reduction: sum`` with
``joint.log_softmax: false``.
"""

from __future__ import annotations

from dataclasses import dataclass

from nemo.collections.asr.losses.rnnt import RNNTLoss
from nemo.collections.asr.modules import RNNTJoint

from asr_plugin.losses import RNNT, TDT, TransducerLattice

# NeMo's implementations, by (module prefix, class name): the loss_name that selects them and their objective.
_NUMBA = "nemo.collections.asr.parts.numba."
_PYTORCH = "nemo.collections.asr.losses.rnnt_pytorch"
_K2 = "nemo.collections.asr.parts.k2."
_IMPLEMENTATIONS = {
    (_NUMBA, "RNNTLossNumba"): ("warprnnt_numba", "rnnt"),
    (_PYTORCH, "RNNTLossPytorch"): ("pytorch", "rnnt"),
    ("warprnnt_pytorch", "RNNTLoss"): ("warprnnt", "rnnt"),
    (_K2, "GraphRnntLoss"): ("graph_rnnt", "rnnt"),
    (_NUMBA, "TDTLossNumba"): ("tdt", "tdt"),
    (_PYTORCH, "TDTLossPytorch"): ("tdt_pytorch", "tdt"),
    (_NUMBA, "MultiblankRNNTLossNumba"): ("multiblank_rnnt", None),
    (_PYTORCH, "MultiblankRNNTLossPytorch"): ("multiblank_rnnt_pytorch", None),
    (_K2, "GraphWTransducerLoss"): ("graph_w_transducer", None),
}


@dataclass(frozen=True)
class LossSettings:
    """The sample-wise loss's arguments that NeMo's loss determines."""

    blank: int  # NeMo's blank: the last token score
    lattice: TransducerLattice  # RNNT(clamp, fastemit_lambda) or TDT(durations, sigma, clamp)
    omega: float = 0.0  # TDT only


def _implementation(loss: RNNTLoss) -> tuple[object, str, str | None]:
    """(NeMo's resolved implementation, its loss_name, "rnnt" / "tdt" / None for another objective)."""
    implementation = loss._loss  # NeMo keeps the resolved implementation here; it has no public accessor
    kind = type(implementation)
    for (module, name), known in _IMPLEMENTATIONS.items():
        if kind.__name__ == name and kind.__module__.startswith(module):
            return implementation, *known
    raise ValueError(
        f"NeMo's loss implementation {kind.__module__}.{kind.__name__} is unknown to the sample-wise joint, which "
        "cannot tell which objective it computes; use loss.loss_name 'default' (warprnnt_numba), 'pytorch' or 'tdt'"
    )


def loss_settings(loss: RNNTLoss, joint: RNNTJoint) -> LossSettings:
    """The sample-wise loss's settings for NeMo's `loss` on `joint`'s outputs; ValueError naming the config key of
    anything it does not compute."""
    if not isinstance(loss, RNNTLoss):
        raise ValueError(
            f"the model's loss is {type(loss).__name__}, not NeMo's RNNTLoss: the sample-wise joint computes the "
            "transducer loss that EncDecRNNTModel sets on its joint"
        )
    implementation, loss_name, objective = _implementation(loss)
    if objective is None:
        raise ValueError(
            f"loss.loss_name = {loss_name!r} is neither the RNN-T nor the TDT loss, the objectives the sample-wise "
            "joint computes; train this model with NeMo's RNNTJoint"
        )
    fastemit = float(getattr(implementation, "fastemit_lambda", 0.0) or 0.0)
    if fastemit != 0.0 and objective == "tdt":
        raise ValueError(
            f"loss.{loss_name}_kwargs.fastemit_lambda = {fastemit}: FastEmit is implemented for the RNN-T loss, not "
            "the sample-wise TDT loss; set it to 0.0 or train with NeMo's RNNTJoint"
        )
    durations = tuple(implementation.durations) if objective == "tdt" else None
    extra = len(durations or ())
    if joint.num_extra_outputs != extra:
        what = f"the {len(durations)} durations of loss.{loss_name}_kwargs" if durations else "the RNN-T loss"
        raise ValueError(
            f"joint.num_extra_outputs = {joint.num_extra_outputs} scores after the token scores, but {what} "
            f"need {extra}"
        )
    blank = joint.num_classes_with_blank - 1 - extra
    if getattr(implementation, "blank", blank) != blank:
        raise ValueError(
            f"NeMo's loss has blank = {implementation.blank} but the joint's blank (its last token score) is {blank}"
        )
    clamp = float(getattr(implementation, "clamp", 0.0) or 0.0)
    clamp = clamp if clamp > 0 else None
    if durations is None:
        return LossSettings(blank=blank, lattice=RNNT(clamp=clamp, fastemit_lambda=fastemit))
    lattice = TDT(durations, float(getattr(implementation, "sigma", 0.0)), clamp=clamp)
    return LossSettings(blank=blank, lattice=lattice, omega=float(getattr(implementation, "omega", 0.0)))
