"""Phrase boosting (hotwords): a list of phrases, tokenised with the model's tokenizer, as an Aho-Corasick graph
held in tensors, and the `TokenScorer` that shallow fusion adds to greedy and beam search
(`asr_plugin.decoding.fusion`).

The scores follow sherpa-onnx's and icefall's context graph: every token on the path of a phrase earns the
phrase's score (where phrases share a prefix, the largest of their scores); a partial match that fails gives its
accumulated bonus back, so a prefix alone is never rewarded; a completed phrase keeps its bonus; `final` takes
back the bonus of a match still open when the hypothesis ends. Matches may overlap and nest (the failure links
find every phrase ending at every token). One detail of timing: a completed phrase that no longer phrase
continues moves the state straight on to its failure state (sherpa-onnx's NeMo beam search goes to the root after
any completed phrase; "strict" context graphs stay on the phrase and give the bonus back at the next token), so
the score of a hypothesis after each token is exactly: the bonuses of the phrases completed so far + the bonus
accumulated by the open match.

Storage: the automaton's transitions with the failure links already followed, as the root's dense row of V
targets plus, per state, the few tokens where its row differs from the root's (its own goto arcs and those of the
states on its failure chain: compressed rows, `row_start` into `row_tokens`); each transition is stored as what a
step needs of it, the score gained on arriving and the state landed in. No states x V table and no failure walk at
decoding time: a step is the root's row broadcast over the batch, the bonus of each hypothesis' open match
subtracted, and its state's few exceptions written over it (sherpa-onnx's and icefall's graphs instead follow
failure links token by token).

The hotwords file is sherpa-onnx's format: one phrase per line, its words separated by spaces, optionally
followed by `` :score`` (the phrase's per-token score; without it, the default `hotwords_score`); blank lines are
skipped.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch


class PhraseTokenizer(Protocol):
    """What boosting needs of a tokenizer (`asr_plugin.text.Tokenizer`)."""

    blank_id: int

    @property
    def vocab_size(self) -> int: ...

    def normalize(self, text: str) -> str: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...


@dataclass(frozen=True)
class Phrase:
    """A phrase to boost.

    Attributes:
        text: its words.
        score: its per-token score (None: the default `hotwords_score`).
        where: where it came from, for error messages ("file.txt:3", or "phrase 2" in a list).
    """

    text: str
    score: float | None = None
    where: str = ""


def read_hotwords(path: str | os.PathLike) -> list[Phrase]:
    """The phrases of a sherpa-onnx hotwords file: one per line, ``WORDS [:score]``; blank lines skipped.
    ValueError naming the file and line for a score that is not a number or is followed by words."""
    path = Path(path)
    phrases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        where = f"{path}:{number}"
        words, score = [], None
        for word in line.split():
            if word.startswith(":"):
                if score is not None:
                    raise ValueError(f"{where}: two scores in {line.strip()!r} (one ':score' after the words)")
                try:
                    score = float(word[1:])
                except ValueError:
                    raise ValueError(f"{where}: the score {word!r} of {line.strip()!r} is not a number") from None
            elif score is not None:
                raise ValueError(f"{where}: words after the score in {line.strip()!r} (put ':score' last)")
            else:
                words.append(word)
        if not words and score is not None:
            raise ValueError(f"{where}: a score without a phrase")
        if words:
            phrases.append(Phrase(" ".join(words), score, where))
    return phrases


def phrase_tokens(
    phrases: Sequence[Phrase | str], tokenizer: PhraseTokenizer, hotwords_score: float
) -> list[tuple[tuple[int, ...], float]]:
    """Each phrase's token ids and per-token score. ValueError naming the phrase (and its line) for an empty
    list, a phrase that normalises to nothing or that the tokenizer cannot spell (it would decode to other text:
    an unknown piece), or a score (its own or `hotwords_score`) that is not finite and > 0."""
    check_score("hotwords_score", hotwords_score)
    if not phrases:
        raise ValueError("no phrases to boost (an empty list or hotwords file)")
    result = []
    for index, item in enumerate(phrases):
        phrase = item if isinstance(item, Phrase) else Phrase(str(item), None, f"phrase {index}")
        name = f"{phrase.where}: phrase {phrase.text!r}" if phrase.where else f"phrase {phrase.text!r}"
        score = hotwords_score if phrase.score is None else phrase.score
        check_score(f"{name}: its score", score)
        normalized = tokenizer.normalize(phrase.text)
        if not normalized.strip():
            raise ValueError(f"{name} is empty once normalised for the tokenizer")
        tokens = tokenizer.encode(phrase.text)
        if tokenizer.decode(tokens) != normalized:
            raise ValueError(
                f"{name}: the tokenizer cannot spell {normalized!r} (it decodes to {tokenizer.decode(tokens)!r})"
            )
        result.append((tuple(tokens), float(score)))
    return result


def check_score(name: str, score: float) -> None:
    """ValueError naming `name` unless `score` is a finite number > 0."""
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) or score <= 0:
        raise ValueError(f"{name} is {score!r}: a boosting score must be a finite number > 0")


@dataclass(frozen=True)
class PhraseGraph:
    """An Aho-Corasick graph over token ids, state 0 the root, as tensors (S states, E row exceptions).

    A transition of state s on token k arrives at the trie state of the longest suffix of s's path + k that is a
    phrase prefix (the root when there is none) and then stands in that state's landing state: itself, or for a
    completed phrase that no longer phrase continues, where its failure links lead.

    Attributes:
        vocab_size: V, the token ids' range.
        bonus: (S,) float32 the bonus accumulated along the state's path (its prefix's token scores).
        root_gain: (V,) float32 the gain of each transition from the root: the bonus of the landing state plus
            every phrase completed on arriving.
        root_landing: (V,) int64 the state each transition from the root lands in.
        row_start: (S + 1,) int64 state s's exceptions are ``row_start[s]:row_start[s + 1]`` (the root has none).
        row_tokens: (E,) int64 the tokens where a state's transitions differ from the root's.
        row_gain: (E,) float32 their gain, as ``root_gain``.
        row_landing: (E,) int64 the state they land in.
    """

    vocab_size: int
    bonus: torch.Tensor
    root_gain: torch.Tensor
    root_landing: torch.Tensor
    row_start: torch.Tensor
    row_tokens: torch.Tensor
    row_gain: torch.Tensor
    row_landing: torch.Tensor

    @classmethod
    def build(
        cls, phrases: Sequence[tuple[Sequence[int], float]], vocab_size: int, sherpa_onnx_score: float | None = None
    ) -> "PhraseGraph":
        """The graph of (token ids, per-token score) phrases (`from_trie` says what `sherpa_onnx_score` does);
        ValueError for no phrases, an empty phrase or a token out of [1, V)."""
        if not phrases:
            raise ValueError("no phrases to boost")
        children: list[dict[int, int]] = [{}]
        token_score, ends, parent, token_of = [0.0], [False], [0], [0]
        for index, (tokens, score) in enumerate(phrases):
            if not tokens or any(not 0 < int(t) < vocab_size for t in tokens):
                raise ValueError(f"phrase {index}: tokens {list(tokens)} must be non-empty ids in [1, {vocab_size})")
            state = 0
            for token in tokens:
                nxt = children[state].get(int(token))
                if nxt is None:
                    nxt = len(children)
                    children[state][int(token)] = nxt
                    children.append({})
                    token_score.append(score)
                    ends.append(False)
                    parent.append(state)
                    token_of.append(int(token))
                token_score[nxt] = max(token_score[nxt], score)
                state = nxt
            ends[state] = True
        return cls.from_trie(children, token_score, ends, parent, token_of, vocab_size, sherpa_onnx_score)

    @classmethod
    def from_trie(
        cls,
        children: list[dict[int, int]],
        token_score: list[float],
        ends: list[bool],
        parent: list[int],
        token_of: list[int],
        vocab_size: int,
        sherpa_onnx_score: float | None = None,
    ) -> "PhraseGraph":
        """The failure links, bonuses, landing states and resolved transitions of a trie (breadth-first: a
        state's failure is shallower, so it is complete when the state is reached).

        With `sherpa_onnx_score`, the scores of sherpa-onnx's NeMo transducer ``modified_beam_search`` with
        hotwords instead: arriving where a phrase ends (the state's own or a suffix's) keeps that one phrase's
        bonus and returns to the root (its context graph in non-strict mode, so a phrase never continues past a
        completed one), and a token that continues the current match directly (a goto arc of the state, not
        one found through failure links; from the root, every phrase's first token) also earns
        `sherpa_onnx_score`, which is never given back (the search adds it to the log-probabilities before
        choosing among its candidates)."""
        num = len(children)
        failure, bonus = [0] * num, [0.0] * num
        completed = [0.0] * num  # bonuses of the phrases that end on arriving at a state (itself and suffixes)
        nearest_end = [-1] * num  # the state itself where a phrase ends there, else the first such suffix
        landing = list(range(num))
        exceptions: list[dict[int, int]] = [{} for _ in range(num)]  # where a state's row differs from the root's
        queue = deque(children[0].values())
        while queue:
            state = queue.popleft()
            up = parent[state]
            bonus[state] = bonus[up] + token_score[state]
            if up != 0:
                token = token_of[state]
                fallback = failure[up]
                while token not in children[fallback] and fallback != 0:
                    fallback = failure[fallback]
                failure[state] = children[fallback].get(token, 0)
            completed[state] = (bonus[state] if ends[state] else 0.0) + completed[failure[state]]
            nearest_end[state] = state if ends[state] else nearest_end[failure[state]]
            if ends[state] and not children[state]:
                landing[state] = landing[failure[state]]
            exceptions[state] = {**exceptions[failure[state]], **children[state]}
            queue.extend(children[state].values())
        gain = [bonus[landing[s]] + completed[s] for s in range(num)]
        direct = 0.0
        if sherpa_onnx_score is not None:
            landing = [s if nearest_end[s] < 0 else 0 for s in range(num)]
            gain = [bonus[s] if nearest_end[s] < 0 else bonus[nearest_end[s]] for s in range(num)]
            exceptions[0] = dict(children[0])  # the root's goto arcs earn the direct bonus too
            direct = sherpa_onnx_score
        root_targets = [0] * vocab_size
        for token, child in children[0].items():
            root_targets[token] = child
        row_start, row_tokens, row_gain, row_landing = [0] * (num + 1), [], [], []
        for state in range(num):
            for token, target in sorted(exceptions[state].items()):
                row_tokens.append(token)
                row_gain.append(gain[target] + (direct if parent[target] == state else 0.0))
                row_landing.append(landing[target])
            row_start[state + 1] = len(row_tokens)
        return cls(
            vocab_size=vocab_size,
            bonus=torch.tensor(bonus, dtype=torch.float32),
            root_gain=torch.tensor([gain[t] for t in root_targets], dtype=torch.float32),
            root_landing=torch.tensor([landing[t] for t in root_targets], dtype=torch.long),
            row_start=torch.tensor(row_start, dtype=torch.long),
            row_tokens=torch.tensor(row_tokens, dtype=torch.long),
            row_gain=torch.tensor(row_gain, dtype=torch.float32),
            row_landing=torch.tensor(row_landing, dtype=torch.long),
        )

    @property
    def num_states(self) -> int:
        return len(self.bonus)

    def to(self, device: torch.device) -> "PhraseGraph":
        """The graph with its tensors on `device`."""
        moved = {name: getattr(self, name).to(device) for name in TENSOR_FIELDS}
        return PhraseGraph(vocab_size=self.vocab_size, **moved)

    def transitions(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(N,) states -> (N, V) float32 the score of each next token (the gain on arriving minus the bonus of
        the open match it leaves), (N, V) int64 the state it lands in."""
        num, vocab = len(states), self.vocab_size
        open_bonus = self.bonus[states]  # (N,)
        scores = self.root_gain.expand(num, vocab) - open_bonus[:, None]
        landing = self.root_landing.expand(num, vocab).clone()
        start = self.row_start[states]
        count = self.row_start[states + 1] - start  # (N,) exceptions of each state's row
        rows = torch.repeat_interleave(torch.arange(num, device=states.device), count)  # (n,)
        if len(rows):
            # position of each exception in the stored rows: its row's start plus its rank within the row
            first = (count.cumsum(0) - count)[rows]
            at = start[rows] + torch.arange(len(rows), device=states.device) - first
            tokens = self.row_tokens[at]
            scores[rows, tokens] = self.row_gain[at] - open_bonus[rows]
            landing[rows, tokens] = self.row_landing[at]
        return scores, landing


TENSOR_FIELDS = ("bonus", "root_gain", "root_landing", "row_start", "row_tokens", "row_gain", "row_landing")


class PhraseBoosting:
    """The `TokenScorer` of a `PhraseGraph` (see the module docstring): state = the landing state of the match
    so far. Use it with weight 1 (`WeightedScorer(boosting, 1.0)`): the phrases' scores are its scale.

    Args:
        graph: the phrases' graph over the model's V tokens.
        blank_id: the model's blank (never a phrase token).
    """

    def __init__(self, graph: PhraseGraph, blank_id: int = 0) -> None:
        self.graph = graph
        self.vocab_size = graph.vocab_size
        self.blank_id = blank_id
        self._on_device: dict[torch.device, PhraseGraph] = {}

    @classmethod
    def from_phrases(
        cls,
        phrases: Sequence[Phrase | str],
        tokenizer: PhraseTokenizer,
        hotwords_score: float = 1.5,
        sherpa_onnx: bool = False,
    ) -> "PhraseBoosting":
        """Boosting of `phrases` (text, or `Phrase` with its own score) tokenised by `tokenizer`, each token of a
        phrase scoring its score or `hotwords_score` (sherpa-onnx's default is 1.5); errors as `phrase_tokens`.
        `sherpa_onnx`: score as sherpa-onnx's NeMo transducer beam search does (`PhraseGraph.from_trie`, its
        direct bonus being `hotwords_score`), to reproduce its results with
        ``beam_search(..., schedule="lowest_frame", merge=False)``."""
        tokens = phrase_tokens(phrases, tokenizer, hotwords_score)
        graph = PhraseGraph.build(tokens, tokenizer.vocab_size, hotwords_score if sherpa_onnx else None)
        return cls(graph, tokenizer.blank_id)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, tokenizer: PhraseTokenizer, hotwords_score: float = 1.5, sherpa_onnx: bool = False
    ) -> "PhraseBoosting":
        """Boosting of the phrases of a sherpa-onnx hotwords file (`read_hotwords`; `sherpa_onnx` as in
        `from_phrases`); errors name file and line."""
        phrases = read_hotwords(path)
        if not phrases:
            raise ValueError(f"{path}: no phrases (the hotwords file has only blank lines)")
        return cls.from_phrases(phrases, tokenizer, hotwords_score, sherpa_onnx)

    def on(self, device: torch.device) -> PhraseGraph:
        """The graph on `device` (moved once)."""
        if device not in self._on_device:
            self._on_device[device] = self.graph.to(device)
        return self._on_device[device]

    def initial_states(self, num: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(num, dtype=torch.long, device=device)

    def advance(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores, next_states = self.on(states.device).transitions(states)  # (N, V) each
        scores[:, self.blank_id] = 0.0
        next_states[:, self.blank_id] = states
        return scores, next_states

    def final(self, states: torch.Tensor) -> torch.Tensor:
        return -self.on(states.device).bonus[states]
