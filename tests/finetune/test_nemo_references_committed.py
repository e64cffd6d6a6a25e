"""The committed NeMo-trained references (tests/nemo_references/, made by scripts/make_nemo_references.py) are
those of the settings in the code: changing `benchmarks.nemo_reference.COMMITTED_REFERENCES` (or what it is made
of: the mini corpus' version, the sizes, the steps) without retraining them fails here, in the main suite, before
the NeMo stage would. Needs no NeMo."""

from __future__ import annotations

import dataclasses
import json

import pytest

from benchmarks.nemo_reference import (
    COMMITTED_REFERENCES,
    FORMS,
    REFERENCES_DIR,
    SETTINGS_NAME,
    StreamingReferenceSettings,
    committed_reference,
    corpus_key,
)


@pytest.mark.parametrize("name", sorted(COMMITTED_REFERENCES))
def test_each_committed_reference_was_trained_with_the_settings_in_the_code(name):
    recorded = json.loads((REFERENCES_DIR / name / SETTINGS_NAME).read_text())
    assert recorded["key"] == COMMITTED_REFERENCES[name].key(), (
        f"retrain: python scripts/make_nemo_references.py --only {name}"
    )
    for form in FORMS:
        assert (REFERENCES_DIR / name / f"{form}.nemo").stat().st_size > 0


def test_a_reference_of_other_settings_is_refused_naming_the_script(tmp_path):
    name = sorted(COMMITTED_REFERENCES)[0]
    stale = tmp_path / name
    stale.mkdir()
    for form in FORMS:
        (stale / f"{form}.nemo").write_bytes(b"x")
    recorded = {"key": "0" * 16, "settings": {"steps": -1}}
    (stale / SETTINGS_NAME).write_text(json.dumps(recorded))
    with pytest.raises(
        ValueError, match=r"other settings .*differing: [^)]*\bsteps\b[^)]*\).*make_nemo_references\.py --only"
    ):
        committed_reference(tmp_path / "work", name, references_dir=tmp_path)
    with pytest.raises(ValueError, match=r"holds no committed NeMo reference.*make_nemo_references\.py"):
        committed_reference(tmp_path / "work", name, references_dir=tmp_path / "absent")


def test_the_committed_references_share_corpora_and_the_key_is_the_corpus_settings():
    """The NeMo stage synthesises one corpus per corpus key (tests/built_once.py): the full-context and streaming
    references speak one, the TDT reference its own of 200 dev and test utterances (the decoding comparisons'
    count); a change that gives any of them another corpus is a minute more of synthesis in every run."""
    keys = {name: corpus_key(settings) for name, settings in COMMITTED_REFERENCES.items()}
    assert keys["full_context"] == keys["streaming"]
    assert len(set(keys.values())) == 2, keys
    streaming = StreamingReferenceSettings()
    assert corpus_key(dataclasses.replace(streaming, steps=1, silence_margin=0.0)) == corpus_key(streaming)
    for change in ({"n_dev": 41}, {"corpus_seed": 1}, {"train_engines": ("espeak", "piper")}):
        assert corpus_key(dataclasses.replace(streaming, **change)) != corpus_key(streaming), change
