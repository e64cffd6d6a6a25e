"""Benchmark, profiling and comparison code behind ``scripts/`` (the scripts are thin command lines over it, and the
tests import it from here): the loss benchmarks and profiles, and the NeMo comparisons' tools (`nemo_examples`:
NeMo's example configs and models built from them; `nemo_reference`: a model trained and fine-tuned by NeMo
itself). Beside evaluation and export: it may use any layer below (losses, models, finetune, training); nothing
in the library imports it."""
