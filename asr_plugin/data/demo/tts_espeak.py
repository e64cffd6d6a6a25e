"""Text-to-speech with espeak-ng, for the synthetic mini corpus.

Preferred backend: the libespeak-ng.so shipped by the `espeakng-loader` package, driven through ctypes
(synchronous mode, samples collected by a synth callback). Fallback: the `espeak-ng` command line tool.

libespeak-ng keeps state across utterances that neither re-initialisation nor its random seed resets
(pitch flutter advances with every sample ever produced), so the same text comes out slightly different
each time within one process. `synthesize_espeak` must therefore run in a fresh process for each list
(`asr_plugin.data.demo.synthesis` does that): the audio then depends only on the list.
"""

from __future__ import annotations

import ctypes
import functools
import io
import shutil
import subprocess

import numpy as np
import soundfile as sf

_AUDIO_OUTPUT_SYNCHRONOUS = 2
_POS_CHARACTER = 1
_ESPEAK_CHARS_UTF8 = 1
_ESPEAK_RATE = 1
_ESPEAK_PITCH = 3
_SYNTH_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)

_INSTALL_HINT = (
    "install the espeakng-loader Python package (pip install espeakng-loader) "
    "or the espeak-ng program (apt-get install espeak-ng)"
)


def _seed_noise(lib: ctypes.CDLL) -> None:
    """Breathy voice variants draw noise from libc's rand() (and newer builds from their own generator):
    seed both, so a fresh process always produces the same samples."""
    if hasattr(lib, "espeak_ng_SetRandSeed"):
        lib.espeak_ng_SetRandSeed(ctypes.c_long(0))
    libc = ctypes.CDLL(None)
    if hasattr(libc, "srand"):
        libc.srand(ctypes.c_uint(0))


class _LibraryBackend:
    """libespeak-ng keeps global state, so one instance per process (see `get_synthesizer`)."""

    def __init__(self) -> None:
        import espeakng_loader

        self._lib = ctypes.CDLL(espeakng_loader.get_library_path())
        self._lib.espeak_Initialize.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
        self._lib.espeak_SetVoiceByName.argtypes = [ctypes.c_char_p]
        self._lib.espeak_SetParameter.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self._lib.espeak_Synth.argtypes = [
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_uint,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.c_uint,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
        self.sample_rate = self._lib.espeak_Initialize(
            _AUDIO_OUTPUT_SYNCHRONOUS, 0, espeakng_loader.get_data_path().encode(), 0
        )
        if self.sample_rate <= 0:
            raise RuntimeError(f"espeak_Initialize failed (returned {self.sample_rate})")
        _seed_noise(self._lib)
        self._chunks: list[np.ndarray] = []
        self._callback = _SYNTH_CALLBACK(self._collect)  # kept alive: C holds a pointer to it
        self._lib.espeak_SetSynthCallback(self._callback)

    def _collect(self, samples, count, _events) -> int:
        if count > 0:
            self._chunks.append(np.ctypeslib.as_array(samples, shape=(count,)).copy())
        return 0  # 0 = continue synthesis

    def __call__(self, text: str, voice: str, rate: int, pitch: int) -> np.ndarray:
        if self._lib.espeak_SetVoiceByName(voice.encode()) != 0:
            raise ValueError(f"voice: espeak-ng has no voice {voice!r}")
        self._lib.espeak_SetParameter(_ESPEAK_RATE, rate, 0)
        self._lib.espeak_SetParameter(_ESPEAK_PITCH, pitch, 0)
        self._chunks = []
        data = text.encode()
        status = self._lib.espeak_Synth(data, len(data) + 1, 0, _POS_CHARACTER, 0, _ESPEAK_CHARS_UTF8, None, None)
        if status != 0:
            raise RuntimeError(f"espeak_Synth failed with status {status} for {text!r}")
        return np.concatenate(self._chunks) if self._chunks else np.zeros(0, dtype=np.int16)


class _CommandBackend:
    """Runs `espeak-ng --stdout` and reads the WAV it prints."""

    def __init__(self, program: str) -> None:
        self.program = program
        self.sample_rate = sf.info(io.BytesIO(self._run("a", "en", 175, 50))).samplerate

    def _run(self, text: str, voice: str, rate: int, pitch: int) -> bytes:
        command = [self.program, "-v", voice, "-s", str(rate), "-p", str(pitch), "--stdout", text]
        return subprocess.run(command, check=True, capture_output=True).stdout

    def __call__(self, text: str, voice: str, rate: int, pitch: int) -> np.ndarray:
        samples, _ = sf.read(io.BytesIO(self._run(text, voice, rate, pitch)), dtype="int16")
        return samples


@functools.cache
def get_synthesizer() -> _LibraryBackend | _CommandBackend:
    """The process-wide espeak-ng backend: a callable (text, voice, rate_wpm, pitch_0_99) -> (N,) int16
    samples, with a `sample_rate` attribute. Raises RuntimeError saying what to install when neither works."""
    try:
        return _LibraryBackend()
    except (ImportError, OSError, RuntimeError, AttributeError) as err:
        library_error = err
    program = shutil.which("espeak-ng")
    if program is None:
        raise RuntimeError(
            f"no espeak-ng text-to-speech available (espeakng_loader library: {library_error!r}; "
            f"espeak-ng program: not found on PATH); {_INSTALL_HINT}"
        )
    return _CommandBackend(program)


def synthesize_espeak(requests: list[tuple[str, str, int, int]], seed: int = 0) -> list[tuple[np.ndarray, int]]:
    """Synthesises (text, voice, rate_wpm, pitch) requests in order: [((N_i,) float32 in [-1, 1], sample
    rate)]. Call it in a fresh process (see the module docstring); `seed` is unused (espeak's noise generators
    are seeded when the process first loads the library), it is there for the engine interface of
    `asr_plugin.data.demo.synthesis`."""
    del seed
    synthesizer = get_synthesizer()
    return [(synthesizer(*request).astype(np.float32) / 32768.0, synthesizer.sample_rate) for request in requests]
