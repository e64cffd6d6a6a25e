"""Benchmark SpecAugment: the batch-vectorised ``asr_plugin.data.SpecAugment`` against the per-utterance loop
it replaced (torchaudio ``FrequencyMasking``/``TimeMasking`` applied utterance by utterance), median time per
batch of LibriSpeech-like shapes (80 bins, utterances of 0.5-1.0 x T frames).

    python scripts/benchmark_specaugment.py --device cpu
    python scripts/benchmark_specaugment.py --device cuda

Both run the LibriSpeech experiment's strength (2 x 27 bins, 10 time masks of up to 5 % of each utterance).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torchaudio

from asr_plugin.data import SpecAugment
from asr_plugin.user_errors import exit_on_user_error

CELLS = ((32, 1000), (64, 1600), (16, 4000))  # (B, T): 10 s, 16 s and 40 s utterances


class LoopSpecAugment(torch.nn.Module):
    """The per-utterance reference: one Python iteration and 12 torchaudio calls per utterance."""

    def __init__(self):
        super().__init__()
        self.freq = torchaudio.transforms.FrequencyMasking(27)
        self.time = torchaudio.transforms.TimeMasking(10**6, p=0.05)

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out = features.clone()
        for b, length in enumerate(lengths.tolist()):
            spec = out[b, :length].transpose(0, 1).unsqueeze(0)  # (1, F, T_b)
            for _ in range(2):
                spec = self.freq(spec)
            for _ in range(10):
                spec = self.time(spec)
            out[b, :length] = spec.squeeze(0).transpose(0, 1)
        return out


def _median_ms(module: torch.nn.Module, features: torch.Tensor, lengths: torch.Tensor, repeats: int) -> float:
    times = []
    for i in range(repeats + 2):
        if features.is_cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        module(features, lengths)
        if features.is_cuda:
            torch.cuda.synchronize()
        if i >= 2:  # two warm-up calls
            times.append(time.perf_counter() - start)
    return 1000 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    device = torch.device(args.device)
    vectorised = SpecAugment(
        num_freq_masks=2, freq_mask_width=27, num_time_masks=10, time_mask_width=None, max_time_mask_ratio=0.05
    ).train()
    loop = LoopSpecAugment().train()
    print(f"device {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    print(f"{'B':>4} {'T':>6} {'loop ms':>9} {'vectorised ms':>14} {'speed-up':>9}")
    generator = torch.Generator().manual_seed(0)
    for batch, frames in CELLS:
        lengths = torch.randint(frames // 2, frames + 1, (batch,), generator=generator)
        lengths[0] = frames
        features = torch.randn(batch, frames, 80, generator=generator).to(device)
        lengths = lengths.to(device)
        slow = _median_ms(loop, features, lengths, args.repeats)
        fast = _median_ms(vectorised, features, lengths, args.repeats)
        print(f"{batch:>4} {frames:>6} {slow:>9.2f} {fast:>14.2f} {slow / fast:>8.1f}x")


if __name__ == "__main__":
    exit_on_user_error()(main)()
