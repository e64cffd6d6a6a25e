"""Data loading: the Lightning data module (`datamodule`), manifests read as utterances (`dataset`) with
SpecAugment and speed perturbation (`augment`), duration-bucketed batches (`sampler`, `batch`) from a
resumable loader (`loader`), and Lhotse Shar directories streamed shard after shard (`shar_stream`)."""
