"""The GPU check: the loss engine's build, CUDA tests, paper-scale benchmarks, TF32 cell, training smoke and
profiles as one time-boxed command whose results survive being cut short (docs/loss.md, "Running the GPU
check"). ``python -m gpucheck --dry-run`` runs the same stages at CPU sizes."""
