"""Checks that an installed asr_plugin environment really works, beyond what `pip check` sees.

    python scripts/check_install.py

Imports every dependency that loads native code and calls into it (an ABI mismatch, e.g. torchaudio 2.11.1's
stable-ABI build next to torch 2.11.0, fails only then), then lists the packages whose versions differ from
requirements/lock.txt, the tested environment (informational: the README's install is not locked).
Exits non-zero, naming the package, when an import or call fails.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import re
import sys
from pathlib import Path

from asr_plugin.user_errors import exit_on_user_error

LOCK = Path(__file__).resolve().parents[1] / "requirements" / "lock.txt"


def _exercise() -> None:
    """One call into each native library the project uses."""
    import numpy as np
    import sentencepiece  # noqa: F401
    import soundfile
    import torch
    import torchaudio

    wave = torch.randn(1, 1600)
    torchaudio.functional.resample(wave, 16000, 8000)
    torchaudio.transforms.MelSpectrogram(n_mels=8)(wave)
    torchaudio.functional.rnnt_loss(
        torch.randn(1, 2, 2, 3),
        torch.ones(1, 1, dtype=torch.int32),
        torch.tensor([2], dtype=torch.int32),
        torch.tensor([1], dtype=torch.int32),
    )
    soundfile.available_formats()
    np.zeros(1)


def _lock_differences() -> list[str]:
    pinned = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        if match:
            pinned[match[1].lower().replace("_", "-")] = match[2]
    differences = []
    for name, version in sorted(pinned.items()):
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            differences.append(f"{name}: locked {version}, not installed")
            continue
        if installed != version:
            differences.append(f"{name}: locked {version}, installed {installed}")
    return differences


def main() -> int:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    for module in (
        "torch",
        "torchaudio",
        "lightning",
        "hydra",
        "sentencepiece",
        "soundfile",
        "jiwer",
        "torchmetrics",
        "espeakng_loader",
        "matplotlib",
        "asr_plugin.data",
        "asr_plugin.training",
    ):
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - report any import failure by package
            print(f"import {module} failed: {type(err).__name__}: {err}", file=sys.stderr)
            return 1
    try:
        _exercise()
    except Exception as err:  # noqa: BLE001
        print(f"a call into a native dependency failed: {type(err).__name__}: {err}", file=sys.stderr)
        return 1
    import torch
    import torchaudio

    print(
        f"imports ok: torch {torch.__version__}, torchaudio {torchaudio.__version__}, python {sys.version.split()[0]}"
    )
    differences = _lock_differences()
    if differences:
        why = "other versions within the bounds, e.g. newer releases or a venv's own setuptools"
        print(f"{len(differences)} package(s) differ from {LOCK.name} ({why}):")
        print("\n".join(f"  {line}" for line in differences))
    else:
        print(f"every package matches {LOCK.name}")
    return 0


if __name__ == "__main__":
    sys.exit(exit_on_user_error()(main)())
