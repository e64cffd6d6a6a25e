"""Data preparation: a corpus's manifests, skip lists, tokenizer and feature statistics written once to a work
directory (`pipeline`, `prepare`, `layout`), by one preparer at a time (`work_lock`) whose worker processes die
with it (`child_processes`); for a Lhotse Shar directory, its tokenizer and statistics (`shar`). See docs/data.md,
"The preparation pipeline"."""
