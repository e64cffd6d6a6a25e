"""``use_samplewise``: turn the joint of a built or restored NeMo transducer into a ``SampleWiseRNNTJoint``."""

from __future__ import annotations

from nemo.collections.asr.models import EncDecRNNTModel
from nemo.collections.asr.modules import RNNTJoint

from asr_plugin.losses import SamplewiseOptions

from .joint import SampleWiseRNNTJoint
from .objective import loss_settings

# Sub-batch of NeMo's training WER when the joint has no fused_batch_size (the value of NeMo's example configs).
DEFAULT_WER_BATCH = 4


def use_samplewise(
    model: EncDecRNNTModel, memory_budget: int | str | None = None, max_samples_per_group: int | None = None
) -> EncDecRNNTModel:
    """Make `model`'s training loss sample-wise, in place, and return `model`.

    The joint (``model.joint``, NeMo's ``RNNTJoint``) becomes a ``SampleWiseRNNTJoint`` by changing its class,
    as ``torch.nn.utils.parametrize`` does: the same module with the same parameters, buffers, device, dtype and
    adapters, so the decoding, the WER and an optimizer built earlier keep referring to it. NeMo's fused path is
    turned on with the model's loss and WER (``fused_batch_size``, now the training WER's decoding sub-batch,
    is kept, or set to 4 when the joint has none). The model's config is left as it was, so a ``.nemo`` saved
    afterwards is a plain NeMo checkpoint (restore it and call this again to continue). NeMo's
    ``change_vocabulary`` rebuilds the joint from its config: call this after it.

    Args:
        model: an ``EncDecRNNTModel`` (BPE, character and hybrid RNNT-CTC models derive from it), e.g. from
            ``ASRModel.restore_from("parakeet-rnnt-1.1b.nemo")``; a TDT model (Parakeet-TDT) gets the TDT loss with
            its own durations, sigma and omega.
        memory_budget, max_samples_per_group: as in ``SampleWiseRNNTJoint``.

    Raises ValueError for a model whose loss the sample-wise loss does not compute (multi-blank, TDT FastEmit; see
    ``asr_plugin.integrations.nemo.objective``), TypeError for a model that is not a NeMo transducer.
    """
    if not isinstance(model, EncDecRNNTModel):
        raise TypeError(f"model must be a NeMo EncDecRNNTModel (an RNN-T or TDT model), got {type(model).__name__}")
    joint = model.joint
    if type(joint) not in (RNNTJoint, SampleWiseRNNTJoint):
        raise TypeError(
            f"model.joint is {type(joint).__module__}.{type(joint).__name__}; use_samplewise replaces NeMo's "
            "RNNTJoint only (a subclass changes what the joint or its fused path computes)"
        )
    # refuse before changing anything
    loss_settings(model.loss, joint)
    options = SamplewiseOptions(memory_budget=memory_budget, max_samples_per_group=max_samples_per_group)
    joint.__class__ = SampleWiseRNNTJoint
    joint.configure_samplewise(options)
    if joint.fused_batch_size is None:
        joint.set_fused_batch_size(DEFAULT_WER_BATCH)
    joint.set_fuse_loss_wer(True, model.loss, model.wer)
    return model
