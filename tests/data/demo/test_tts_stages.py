"""`scripts/benchmark_tts.py --stages`: where a Piper utterance's synthesis time goes, measured on the audio the
corpus' own engine makes of the same utterances."""

from __future__ import annotations

import pytest


def test_the_stages_cover_the_audio_the_engine_makes(capsys):
    import benchmark_tts

    from benchmarks.tts import PIPER_STAGES, piper_stages, tts_throughput

    seconds = piper_stages(utterances=2)
    assert list(seconds)[: len(PIPER_STAGES)] == list(PIPER_STAGES) and all(seconds[s] > 0 for s in PIPER_STAGES)
    (piper,) = [row for row in tts_throughput(utterances=2) if row.engine == "piper"]
    assert seconds["audio (s)"] == pytest.approx(piper.audio_s, abs=2e-4)  # the same utterances, one sample each
    benchmark_tts.main(["--stages", "--utterances", "1"])
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("Piper, 1 utterances,") and [line.split(" | ")[0] for line in printed[3:]] == [
        f"| {stage}" for stage in PIPER_STAGES
    ]
