"""An ARPA n-gram language model over the transducer's tokens as a batched `TokenScorer` (shallow fusion).

The ARPA file (`asr_plugin.decoding.arpa_reader`: why our own parser) becomes a back-off automaton in tensors, as
NeMo's NGPU-LM does: a state per history the file holds (every n-gram below the top order, plus the empty history,
state 0), an arc per n-gram (from its history to the longest history that ends it), and per state its back-off
weight and back-off state (its longest proper suffix that is a state). The score of token w after history h is
kenlm's: the first suffix s of h (h itself, then shorter) with an n-gram s+w gives its log-probability, plus the
back-off weights of the longer suffixes passed; the next state is the longest suffix of h+w that is a state.

Querying (`advance`): for each state of the batch, all V tokens at once, walking the back-off chain (at most
`order` steps, no host sync): each step looks the (state, token) keys up in the sorted arc keys (``searchsorted``).
When states x V is small (`dense_limit`), every state's row is computed once that way and `advance` is a gather.
`memory_bytes` says what the tensors take: 20 bytes an arc (int64 key, float32 weight, int64 next state), 16 a
state, plus 12 bytes a (state, token) pair for the dense rows.

Words of the file and token ids (`words`): ``"pieces"``, the tokenizer's pieces (what scripts/build_ngram_lm.py
writes); ``"nemo"``, NeMo's convention for token-level ARPAs, ``chr(k + 100)`` for its token k
(``DEFAULT_TOKEN_OFFSET`` of ``nemo.collections.asr.parts.submodules.ngram_lm``), our k + 1 when the blank is 0
(NeMo's blank is its last id); ``"auto"``, pieces when every word is one, else NeMo's when every word is one of
those. A word that is neither is refused, naming up to 5.
Special words: ``<s>`` starts every hypothesis (`initial_states`: the state of the history ``<s>``), ``</s>``
ends it (`final`, back-offs included), ``<unk>`` (kenlm's log10 -100 when the file has none) scores every token
the file does not list, as kenlm scores an unknown word: as the word ``<unk>``, in any n-gram that holds it. The
blank column scores 0 and keeps the state (`asr_plugin.decoding.fusion`). NeMo's NGPU-LM differs for tokens the
file lacks: its default ``normalize_unk=True`` divides ``<unk>``'s probability among them, and it sends them to
the empty history, which equals kenlm's only when ``<unk>`` has no back-off weight or n-grams of its own (as in
IRSTLM's files; tests/decoding/test_ngram_lm_nemo.py compares with ``normalize_unk=False``). Scores are natural-log (ARPA's
log10 times ln 10).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from asr_plugin.decoding.arpa_reader import DEFAULT_MAX_BYTES, ArpaNgrams, read_arpa
from asr_plugin.decoding.fusion import WeightedScorer

WORD_CONVENTIONS = ("auto", "pieces", "nemo")
NEMO_TOKEN_OFFSET = 100
BOS, EOS, UNK = "<s>", "</s>", "<unk>"
SPECIAL_WORDS = (BOS, EOS, UNK)
KENLM_MISSING_UNK_LOG10 = -100.0
DEFAULT_DENSE_LIMIT = 1 << 22  # (state, token) pairs kept dense: 4 Mi pairs = 48 MiB
LM_OPTIONS = ("decoding.lm.path", "decoding.lm.weight")  # eval.py's; transcribe.py's are --lm, --lm-weight
DEFAULT_LM_WEIGHT = 0.3
_LN10 = math.log(10.0)


class NgramLM:
    """A back-off n-gram LM as a `TokenScorer`; build it with `NgramLM.from_arpa`.

    Attributes:
        vocab_size: V, the transducer's tokens (blank included).
        blank_id: the transducer's blank.
        order: the n-gram order.
        num_states: the histories (automaton states).
        num_arcs: the n-grams that are arcs (all but those ending in ``</s>`` or ``<s>``).
        language_model: True: its scores are next-token log-probabilities (the beam search's blank scoring,
            `asr_plugin.decoding.fusion.lm_weighted_blank`, is weighted by its weight).
    """

    language_model = True

    def __init__(self, tensors: dict[str, torch.Tensor], vocab_size: int, blank_id: int, order: int):
        self._t = tensors
        self.num_words = vocab_size + len(SPECIAL_WORDS)  # the arc keys' radix: tokens, then the special words
        self.vocab_size = vocab_size
        self.blank_id = blank_id
        self.order = order
        self.num_states = int(tensors["backoff_to"].numel())
        self.num_arcs = int(tensors["arc_keys"].numel())

    @classmethod
    def from_arpa(
        cls,
        path: str | os.PathLike,
        pieces: Sequence[str],
        blank_id: int = 0,
        words: str = "auto",
        max_bytes: int = DEFAULT_MAX_BYTES,
        dense_limit: int = DEFAULT_DENSE_LIMIT,
    ) -> NgramLM:
        """Reads an ARPA file for a transducer whose token k spells `pieces[k]` (``tokenizer.id_to_piece``).

        Args:
            path: the ARPA file.
            pieces: the V token pieces, the blank's included (its piece is never a word).
            blank_id: the blank's id.
            words: how the file's words name tokens: "auto", "pieces" or "nemo" (module docstring).
            max_bytes: a larger file is refused before it is read.
            dense_limit: precompute every state's row when states x V is at most this.
        """
        if words not in WORD_CONVENTIONS:
            raise ValueError(f"words={words!r}: expected one of {WORD_CONVENTIONS}")
        if not 0 <= blank_id < len(pieces):
            raise ValueError(f"blank_id={blank_id} is not an id of the {len(pieces)} pieces")
        arpa = read_arpa(path, max_bytes=max_bytes)
        word_to_id = _word_ids(arpa, pieces, blank_id, words)
        tensors = _Automaton(arpa, word_to_id, len(pieces)).tensors()
        lm = cls(tensors, len(pieces), blank_id, arpa.order)
        if lm.num_states * lm.vocab_size <= dense_limit:
            lm._t.update(lm._dense_rows())
        return lm

    # ---- the TokenScorer protocol ----------------------------------------------------------------------------
    def initial_states(self, num: int, device: torch.device) -> torch.Tensor:
        """(num,) int64 the state of the history ``<s>``."""
        return self._t["initial"].to(device).expand(num).clone()

    def advance(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) int64 states -> (N, V) float32 natural-log probabilities, (N, V) int64 next states."""
        if "dense_scores" in self._t:
            return self._t["dense_scores"][states], self._t["dense_next"][states]
        scores, next_states = self._walk(states)
        scores[:, self.blank_id] = 0.0
        next_states[:, self.blank_id] = states
        return scores, next_states

    def final(self, states: torch.Tensor) -> torch.Tensor:
        """(N,) int64 states -> (N,) float32 the natural-log probability of ``</s>`` there."""
        return self._t["final"][states]

    # ---- beyond the protocol -------------------------------------------------------------------------------
    def to(self, device: torch.device | str) -> NgramLM:
        """The same LM with its tensors on `device`."""
        moved = {name: tensor.to(device) for name, tensor in self._t.items()}
        return NgramLM(moved, self.vocab_size, self.blank_id, self.order)

    @property
    def device(self) -> torch.device:
        return self._t["arc_keys"].device

    def memory_bytes(self) -> int:
        """What the LM's tensors take."""
        return sum(tensor.numel() * tensor.element_size() for tensor in self._t.values())

    def _walk(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The back-off chain for all V tokens of each state: (N, V) scores and next states (blank not set)."""
        t = self._t
        words = t["column_word"]  # (V,) the file's word id of each token (<unk>'s for tokens it lacks)
        num_words = self.num_words
        current = states.clone()
        backed_off = torch.zeros(states.shape, dtype=torch.float32, device=states.device)  # (N,)
        scores = torch.zeros((states.numel(), self.vocab_size), dtype=torch.float32, device=states.device)
        next_states = torch.zeros((states.numel(), self.vocab_size), dtype=torch.int64, device=states.device)
        found = torch.zeros_like(scores, dtype=torch.bool)
        last = t["arc_keys"].numel() - 1
        # the chain from a history of order - 1 words down to the empty one (state 0, which has every word) is
        # `order` states long; the empty history backs off to itself, so extra steps change nothing
        for _ in range(self.order):
            keys = current[:, None] * num_words + words[None, :]  # (N, V)
            position = torch.searchsorted(t["arc_keys"], keys).clamp_(max=last)
            hit = (t["arc_keys"][position] == keys) & ~found
            scores = torch.where(hit, backed_off[:, None] + t["arc_weights"][position], scores)
            next_states = torch.where(hit, t["arc_next"][position], next_states)
            found |= hit
            backed_off = backed_off + t["backoff_weights"][current]
            current = t["backoff_to"][current]
        return scores, next_states

    def _dense_rows(self) -> dict[str, torch.Tensor]:
        """Every state's `advance` row, computed in chunks of states."""
        all_states = torch.arange(self.num_states, dtype=torch.int64, device=self.device)
        rows = [self.advance(chunk) for chunk in all_states.split(max(1, (1 << 20) // self.vocab_size))]
        return {
            "dense_scores": torch.cat([scores for scores, _ in rows]),
            "dense_next": torch.cat([next_states for _, next_states in rows]),
        }


def check_lm_options(path: str | os.PathLike | None, weight: float, names: tuple[str, str] = LM_OPTIONS) -> None:
    """ValueError naming the weight's option unless it is a finite number; FileNotFoundError naming the path's
    unless it is None or a file."""
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise ValueError(f"{names[1]}={weight!r}: a finite number (the LM's natural-log scores are multiplied by it)")
    if path is not None and not Path(path).is_file():
        raise FileNotFoundError(f"{names[0]}={path}: no such ARPA file")


def lm_fusion(
    path: str | os.PathLike | None,
    weight: float,
    tokenizer,
    device: torch.device | str = "cpu",
    names: tuple[str, str] = LM_OPTIONS,
) -> list[WeightedScorer]:
    """The fusion entry of an LM's two options (`names`: the path's, the weight's): none without a path, else the
    ARPA file's `NgramLM` for `tokenizer`'s pieces (``vocab_size``, ``blank_id``, ``id_to_piece``) on `device` with
    `weight`; a weight that is not a finite number, or a missing file, is refused naming its option."""
    if path is None:
        return []
    check_lm_options(path, weight, names)
    pieces = [tokenizer.id_to_piece(k) for k in range(tokenizer.vocab_size)]
    return [WeightedScorer(NgramLM.from_arpa(path, pieces, tokenizer.blank_id).to(device), float(weight))]


def _word_ids(arpa: ArpaNgrams, pieces: Sequence[str], blank_id: int, words: str) -> dict[str, int]:
    """The token id of each word of the file (special words left out); refuses words that name no token."""
    special = set(SPECIAL_WORDS)
    file_words = [w for (w,) in arpa.words[0] if w not in special]
    tokens = [k for k in range(len(pieces)) if k != blank_id]
    maps = {
        "pieces": {pieces[k]: k for k in tokens if pieces[k] not in special},
        "nemo": {chr(NEMO_TOKEN_OFFSET + nemo_id): k for nemo_id, k in enumerate(tokens)},
    }
    candidates = ["pieces", "nemo"] if words == "auto" else [words]
    for convention in candidates:
        if all(w in maps[convention] for w in file_words):
            return maps[convention]
    unknown = [w for w in file_words if w not in maps[candidates[0]]]
    spelled = "the tokenizer's pieces or NeMo's chr(token_id + 100)" if words == "auto" else f"words={words!r}"
    raise ValueError(
        f"ARPA file {arpa.path}: {len(unknown)} of its 1-gram words name no token of this model's {len(pieces)} "
        f"({spelled}), e.g. {', '.join(repr(w) for w in unknown[:5])}: an LM of another vocabulary?"
    )


class _Automaton:
    """The ARPA's n-grams as automaton arrays (numpy while building; `tensors` hands them over as torch)."""

    def __init__(self, arpa: ArpaNgrams, word_to_id: dict[str, int], vocab_size: int):
        self.arpa = arpa
        # word ids: the tokens' own ids, then the special words
        self.ids = dict(word_to_id, **{word: vocab_size + i for i, word in enumerate(SPECIAL_WORDS)})
        self.num_words = vocab_size + len(SPECIAL_WORDS)
        self.vocab_size = vocab_size
        self.grams = [
            [tuple(self.ids[w] for w in gram) for gram in order_grams] for order_grams in self._checked_words()
        ]
        self.state_of: dict[tuple[int, ...], int] = {(): 0}
        for order_grams in self.grams[: arpa.order - 1]:
            for gram in order_grams:
                self.state_of.setdefault(gram, len(self.state_of))

    def _checked_words(self) -> list[list[tuple[str, ...]]]:
        """The file's n-grams, refusing a word of a longer n-gram that is no 1-gram's."""
        known = {w for (w,) in self.arpa.words[0]} | set(SPECIAL_WORDS)
        for order_grams, order_lines in zip(self.arpa.words[1:], self.arpa.lines[1:]):
            for gram, line in zip(order_grams, order_lines):
                stray = [w for w in gram if w not in known]
                if stray:
                    raise ValueError(f"ARPA file {self.arpa.path}, line {line}: word {stray[0]!r} is not a 1-gram")
        return self.arpa.words

    def _longest_state(self, gram: tuple[int, ...]) -> int:
        """The state of the longest suffix of `gram` that is a history of the file."""
        for start in range(len(gram) + 1):
            state = self.state_of.get(gram[start:])
            if state is not None:
                return state
        raise AssertionError("the empty history is always a state")

    def tensors(self) -> dict[str, torch.Tensor]:
        num_states = len(self.state_of)
        backoff_weights = np.zeros(num_states, dtype=np.float64)  # log10, as the file's
        backoff_to = np.zeros(num_states, dtype=np.int64)
        final_direct = np.full(num_states, np.nan, dtype=np.float64)  # the file's "h </s>" n-grams
        keys, weights, next_states = [], [], []
        for order, order_grams in enumerate(self.grams, start=1):
            columns = (
                self.arpa.log10_probs[order - 1],
                self.arpa.log10_backoffs[order - 1],
                self.arpa.lines[order - 1],
            )
            for gram, prob, backoff, line in zip(order_grams, *columns):
                state = self.state_of.get(gram) if order < self.arpa.order else None
                if state is not None:
                    backoff_weights[state] = backoff
                    backoff_to[state] = self._longest_state(gram[1:])
                history = self.state_of.get(gram[:-1])
                if history is None:
                    raise ValueError(
                        f"ARPA file {self.arpa.path}, line {line}: its history is not a {order - 1}-gram of the file"
                    )
                if gram[-1] == self.ids[EOS]:
                    final_direct[history] = prob
                elif gram[-1] != self.ids[BOS]:  # <s> is never predicted
                    keys.append(history * self.num_words + gram[-1])
                    weights.append(prob)
                    next_states.append(state if state is not None else self._longest_state(gram[1:]))
        unigrams = dict(zip(self.grams[0], self.arpa.log10_probs[0]))
        unk_log10 = unigrams.get((self.ids[UNK],), KENLM_MISSING_UNK_LOG10)
        if (self.ids[UNK],) not in unigrams:  # kenlm's <unk>: from the empty history back to it
            keys.append(self.ids[UNK])
            weights.append(unk_log10)
            next_states.append(0)
        sort = np.argsort(np.asarray(keys, dtype=np.int64), kind="stable")
        column_word = [k if (k,) in unigrams else self.ids[UNK] for k in range(self.vocab_size)]
        final = _resolved_final(final_direct, backoff_weights, backoff_to, unk_log10, self.arpa.order)
        return {
            "arc_keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)[sort]),
            "arc_weights": torch.from_numpy((np.asarray(weights) * _LN10).astype(np.float32)[sort]),
            "arc_next": torch.from_numpy(np.asarray(next_states, dtype=np.int64)[sort]),
            "backoff_weights": torch.from_numpy((backoff_weights * _LN10).astype(np.float32)),
            "backoff_to": torch.from_numpy(backoff_to),
            "final": torch.from_numpy((final * _LN10).astype(np.float32)),
            "column_word": torch.tensor(column_word, dtype=torch.int64),
            "initial": torch.tensor([self.state_of.get((self.ids[BOS],), 0)], dtype=torch.int64),
        }


def _resolved_final(
    direct: np.ndarray, backoffs: np.ndarray, backoff_to: np.ndarray, unk_log10: float, order: int
) -> np.ndarray:
    """(S,) log10 P(</s> | each state): the file's "h </s>" where it has one, else the back-off weight plus the
    back-off state's (the empty history without a "</s>" 1-gram: </s> is an unknown word, as in kenlm)."""
    final = direct.copy()
    final[0] = unk_log10 if np.isnan(direct[0]) else direct[0]
    for _ in range(order):  # a back-off chain is at most order - 1 steps; state 0 backs off to itself
        final = np.where(np.isnan(direct), backoffs + final[backoff_to], direct)
    return final
