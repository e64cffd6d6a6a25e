"""The speakers of the synthetic mini corpus, per text-to-speech engine and split.

Train, dev and test have disjoint voices in every engine: espeak-ng voice variants (formants, pitch range,
synthesis method) that training never hears, and for Piper's one neural voice other vocal-tract factors
(the rate its output is played at, which moves pitch and formants) than any training speaker's.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from asr_plugin.data.demo.tts_piper import PiperRequest

ENGINES = ("espeak", "piper")
SPLIT_KINDS = ("train", "dev", "test")

# English accents of espeak-ng: how words are pronounced. Every accent is heard in training.
ACCENTS = ("en-us", "en", "en-gb-x-rp", "en-gb-scotland", "en-us-nyc", "en-029", "en-gb-x-gbclan", "en-gb-x-gbcwmd")
# espeak-ng voice variants: the timbre. Dev and test speakers use variants that training never hears.
VARIANTS = {
    "train": (
        "m1",
        "m3",
        "m5",
        "m6",
        "m7",
        "m8",
        "f1",
        "f3",
        "f4",
        "klatt",
        "klatt4",
        "klatt5",
        "Alex",
        "adam",
        "anika",
        "aunty",
        "benjamin",
        "boris",
        "david",
        "ed",
        "edward",
        "grandma",
        "grandpa",
        "iven",
        "linda",
        "max",
        "michel",
        "paul",
        "quincy",
        "rob",
        "steph",
        "travis",
        "victor",
        "Mike",
        "Reed",
        "Hugo",
        "Alicia",
        "Andrea",
        "Denis",
        "Mario",
    ),
    "dev": ("m4", "f5", "klatt2", "robert"),
    "test": ("m2", "f2", "klatt3", "Michael", "belinda", "Gene"),
}
RATE_RANGE = (135, 185)  # espeak-ng words per minute of a speaker
PITCH_RANGE = (30, 70)  # espeak-ng base pitch (0-99), on top of the variant's own range

# Piper speakers: the rate (Hz) the voice's 22,050 Hz output is played at, one speaker per rate. 19,200 Hz
# (x0.87: lower pitch and formants) to 25,200 Hz (x1.14); dev and test rates lie between training's.
PLAYED_AT_HZ = {
    "train": (19200, 19600, 20000, 20400, 21200, 21600, 22000, 22400, 23200, 23600, 24000, 24800),
    "dev": (20800, 24400),
    "test": (19400, 21400, 22800, 25200),
}
PIPER_RATE = 22050  # the voice's own sample rate
LENGTH_SCALE_RANGE = (0.9, 1.15)  # a Piper speaker's tempo (phoneme length; > 1 slower), before the rate factor
NOISE_SCALE_RANGE = (0.45, 0.85)  # the generator's noise (the voice's default 0.667)
NOISE_W_RANGE = (0.5, 1.0)  # the duration predictor's noise (default 0.8)

# Speaker ids (LibriSpeech-style numbers): the first of each engine in each split.
SPEAKER_BASE = {
    ("train", "espeak"): 100,
    ("train", "piper"): 200,
    ("dev", "espeak"): 800,
    ("dev", "piper"): 850,
    ("test", "espeak"): 900,
    ("test", "piper"): 950,
}


@dataclass(frozen=True)
class EspeakVoice:
    """An espeak-ng accent + variant ("en-us+m3"), a speaking rate (words/min) and a base pitch (0-99)."""

    voice: str
    rate: int
    pitch: int

    def request(self, text: str, tempo: float) -> tuple[str, str, int, int]:
        """The `synthesize_espeak` request of `text` at `tempo` times this speaker's rate."""
        # espeak reads all-capital words as acronyms, so it gets lower case.
        return text.lower(), self.voice, round(self.rate * tempo), self.pitch


@dataclass(frozen=True)
class PiperVoiceSettings:
    """A Piper speaker: tempo (length scale), noise scales and the rate its output is played at."""

    length_scale: float
    noise_scale: float
    noise_w: float
    played_at_hz: int

    def request(self, text: str, tempo: float) -> PiperRequest:
        """The `synthesize_piper` request of `text` at `tempo` times this speaker's speed. The length scale is
        stretched by the playing rate's factor, so a higher voice does not also speak faster."""
        stretch = self.played_at_hz / PIPER_RATE
        return PiperRequest(
            text.lower(),
            round(self.length_scale * stretch / tempo, 4),
            self.noise_scale,
            self.noise_w,
            self.played_at_hz,
        )


@dataclass(frozen=True)
class Speaker:
    """A synthetic speaker: its LibriSpeech-style id, the engine and that engine's voice settings."""

    id: int
    engine: str
    voice: EspeakVoice | PiperVoiceSettings


def _espeak_speakers(kind: str, rng: random.Random) -> tuple[Speaker, ...]:
    base = SPEAKER_BASE[(kind, "espeak")]
    return tuple(
        Speaker(
            base + index,
            "espeak",
            EspeakVoice(f"{rng.choice(ACCENTS)}+{variant}", rng.randint(*RATE_RANGE), rng.randint(*PITCH_RANGE)),
        )
        for index, variant in enumerate(VARIANTS[kind])
    )


def _piper_speakers(kind: str, rng: random.Random) -> tuple[Speaker, ...]:
    base = SPEAKER_BASE[(kind, "piper")]
    return tuple(
        Speaker(
            base + index,
            "piper",
            PiperVoiceSettings(
                round(rng.uniform(*LENGTH_SCALE_RANGE), 3),
                round(rng.uniform(*NOISE_SCALE_RANGE), 3),
                round(rng.uniform(*NOISE_W_RANGE), 3),
                played_at_hz,
            ),
        )
        for index, played_at_hz in enumerate(PLAYED_AT_HZ[kind])
    )


def speakers(seed: int) -> dict[tuple[str, str], tuple[Speaker, ...]]:
    """{(split kind, engine): speakers}: every speaker's settings drawn from `seed`."""
    rng = random.Random(f"speakers-{seed}")
    made = {"espeak": _espeak_speakers, "piper": _piper_speakers}
    return {(kind, engine): made[engine](kind, rng) for kind in SPLIT_KINDS for engine in ENGINES}
