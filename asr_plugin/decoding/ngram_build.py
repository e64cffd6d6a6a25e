"""A token-level ARPA n-gram LM of a text, for shallow fusion (`asr_plugin.decoding.ngram_lm`), estimated by IRSTLM.

Each sentence is tokenised with the model's tokenizer and written as its pieces (or NeMo's ``chr(k + 100)``
words: ``words="nemo"``), one sentence a line between ``<s>`` and ``</s>``; IRSTLM's ``build-lm.sh`` estimates the
LM and ``compile-lm --text=yes`` writes it as ARPA, which is written again without IRSTLM's n-grams across
sentence boundaries (`within_sentences`). IRSTLM because it is the standard estimator that installs
here from Debian (package ``irstlm``): KenLM's ``lmplz`` is not packaged for Debian nor in the ``kenlm`` wheel,
and NeMo's n-gram script calls ``lmplz``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from asr_plugin.decoding.arpa_reader import ArpaNgrams, read_arpa
from asr_plugin.decoding.ngram_lm import BOS, EOS, NEMO_TOKEN_OFFSET
from asr_plugin.files import write_text_atomic
from asr_plugin.text.tokenizer import Tokenizer

IRSTLM_PACKAGE = "irstlm"
IRSTLM_HOMES = ("/usr/lib/irstlm",)  # Debian's; $IRSTLM first when set
SMOOTHINGS = ("witten-bell", "shift-beta", "improved-shift-beta", "stupid-backoff")
WORDS = ("pieces", "nemo")


def token_sentences(texts: Iterable[str], tokenizer: Tokenizer, words: str = "pieces") -> list[str]:
    """Each text as its tokens' words joined by spaces (empty texts left out): pieces, or NeMo's chr(k + 100)
    for NeMo's token k, our k + 1 (`ngram_lm`'s "nemo" words)."""
    if words not in WORDS:
        raise ValueError(f"words={words!r}: expected one of {WORDS}")
    sentences = []
    for text in texts:
        ids = tokenizer.encode(text)
        spelled = (
            [tokenizer.id_to_piece(k) for k in ids]
            if words == "pieces"
            else [chr(NEMO_TOKEN_OFFSET + k - 1) for k in ids]
        )
        if spelled:
            sentences.append(" ".join(spelled))
    return sentences


def irstlm_home() -> Path:
    """The IRSTLM installation (``bin/build-lm.sh``, ``bin/compile-lm``); FileNotFoundError naming the Debian
    package when there is none."""
    candidates = [os.environ["IRSTLM"]] if os.environ.get("IRSTLM") else []
    for home in map(Path, [*candidates, *IRSTLM_HOMES]):
        if (home / "bin" / "build-lm.sh").is_file() and (home / "bin" / "compile-lm").is_file():
            return home
    raise FileNotFoundError(
        f"IRSTLM (build-lm.sh, compile-lm) is not installed in {[*candidates, *IRSTLM_HOMES]}: install Debian's "
        f"package {IRSTLM_PACKAGE} (apt-get install {IRSTLM_PACKAGE}) or set IRSTLM to its directory"
    )


def irstlm_installed() -> bool:
    """Whether `build_arpa` finds IRSTLM."""
    try:
        irstlm_home()
    except FileNotFoundError:
        return False
    return True


def build_arpa(
    sentences: Iterable[str], output: str | os.PathLike, order: int = 3, smoothing: str = "witten-bell"
) -> Path:
    """Estimates an `order`-gram LM of `sentences` (words separated by spaces) with IRSTLM and writes it to
    `output` as ARPA (atomically)."""
    if order < 1:
        raise ValueError(f"order={order}: an n-gram order is 1 or more")
    if smoothing not in SMOOTHINGS:
        raise ValueError(f"smoothing={smoothing!r}: IRSTLM's are {SMOOTHINGS}")
    home = irstlm_home()
    with tempfile.TemporaryDirectory(prefix="build_ngram_lm_") as work:
        corpus, estimated, log = Path(work, "corpus.txt"), Path(work, "lm.gz"), Path(work, "build-lm.log")
        with open(corpus, "w", encoding="utf-8") as handle:
            count = sum(handle.write(f"<s> {sentence} </s>\n") > 0 for sentence in sentences)
        if count == 0:
            raise ValueError("no sentence to estimate an n-gram LM from")
        build = [str(home / "bin" / "build-lm.sh"), "-i", str(corpus), "-n", str(order), "-o", str(estimated)]
        build += ["-k", "1", "-s", smoothing, "-t", str(Path(work, "stat")), "-l", str(log)]
        _run(build, home, log, estimated, f"{order}-gram {smoothing} estimation of {count} sentences")
        arpa = Path(work, "lm.arpa")
        _run([str(home / "bin" / "compile-lm"), str(estimated), "--text=yes", str(arpa)], home, log, arpa, "compile-lm")
        return write_text_atomic(output, arpa_text(within_sentences(read_arpa(arpa))))


def within_sentences(arpa: ArpaNgrams) -> ArpaNgrams:
    """`arpa` without the n-grams that cross a sentence boundary: ``<s>`` past the first word or ``</s>`` before
    the last (IRSTLM writes ``<s> <s>`` and its extensions; a search starts after one ``<s>`` and never reaches
    them, and NeMo's reader refuses them). The n-grams kept hold every prefix and suffix of theirs."""
    kept = [[i for i, gram in enumerate(grams) if BOS not in gram[1:] and EOS not in gram[:-1]] for grams in arpa.words]
    columns = (arpa.words, arpa.log10_probs, arpa.log10_backoffs, arpa.lines)
    return ArpaNgrams(arpa.path, *([[column[k][i] for i in kept[k]] for k in range(arpa.order)] for column in columns))


def arpa_text(arpa: ArpaNgrams) -> str:
    """The ARPA file of `arpa` (tab-separated, as kenlm writes it; no back-off where the order is the top one)."""
    lines = ["\\data\\", *(f"ngram {k}={len(grams)}" for k, grams in enumerate(arpa.words, start=1))]
    for k in range(arpa.order):
        lines += ["", f"\\{k + 1}-grams:"]
        for gram, prob, backoff in zip(arpa.words[k], arpa.log10_probs[k], arpa.log10_backoffs[k]):
            fields = [repr(prob), " ".join(gram)] + ([repr(backoff)] if backoff and k + 1 < arpa.order else [])
            lines.append("\t".join(fields))
    return "\n".join([*lines, "", "\\end\\", ""])


def _run(command: list[str], home: Path, log: Path, output: Path, what: str) -> None:
    """Runs an IRSTLM program; its failure (or no `output`: build-lm.sh exits 0 when a step fails) raises with
    the end of its messages and log."""
    done = subprocess.run(command, env=dict(os.environ, IRSTLM=str(home)), capture_output=True, text=True)
    if done.returncode != 0 or not output.is_file():
        log_text = log.read_text(errors="replace") if log.is_file() else ""
        tail = (done.stdout + done.stderr + log_text).strip().splitlines()[-5:]
        raise ValueError(f"IRSTLM's {what} failed (exit status {done.returncode}): {' | '.join(tail)}")
