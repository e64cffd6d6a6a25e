"""Integrations with other toolkits; each imports its toolkit only when one of its names is used.

- ``asr_plugin.integrations.nemo``: the sample-wise transducer loss inside NeMo's own RNN-T training.
- ``asr_plugin.integrations.transformers``: the sample-wise transducer loss inside Hugging Face transformers'
  Parakeet (ParakeetForRNNT, ParakeetForTDT) training.
"""
