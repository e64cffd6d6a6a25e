"""asr_plugin: neural transducer (RNN-T) training with a memory-bounded sample-wise loss."""

__version__ = "0.1.0"
