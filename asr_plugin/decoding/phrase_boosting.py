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

Storage: goto arcs as one sorted array of keys state x V + token (looked up with ``searchsorted``), failure
links, and per state the accumulated bonus and the score of landing there; no states x V table. A step follows
failure links for at most the trie's depth, vectorised over the batch and the V tokens.

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
    """An Aho-Corasick graph over token ids, state 0 the root, as tensors (S states, A arcs).

    Attributes:
        vocab_size: V, the token ids' range.
        arc_keys: (A,) int64 sorted keys state x V + token of the goto arcs.
        arc_targets: (A,) int64 the state each arc leads to.
        failure: (S,) int64 the state of the longest proper suffix that is a trie state (the root's: itself).
        bonus: (S,) float32 the bonus accumulated along the state's path (its prefix's token scores).
        landing: (S,) int64 the state a search stands in after arriving here: the state itself, or for a
            completed phrase that no longer phrase continues, where its failure links lead.
        gain: (S,) float32 the bonus of the landing state plus every phrase completed on arriving here.
        depth: (S,) int64 tokens from the root.
        root_targets: (V,) int64 where each token leads from the root (the root where no phrase starts with it):
            every failure walk ends there, so its row is kept whole.
    """

    vocab_size: int
    arc_keys: torch.Tensor
    arc_targets: torch.Tensor
    failure: torch.Tensor
    bonus: torch.Tensor
    landing: torch.Tensor
    gain: torch.Tensor
    depth: torch.Tensor
    root_targets: torch.Tensor

    @classmethod
    def build(cls, phrases: Sequence[tuple[Sequence[int], float]], vocab_size: int) -> "PhraseGraph":
        """The graph of (token ids, per-token score) phrases; ValueError for no phrases, an empty phrase or a
        token out of [1, V)."""
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
        return cls.from_trie(children, token_score, ends, parent, token_of, vocab_size)

    @classmethod
    def from_trie(
        cls,
        children: list[dict[int, int]],
        token_score: list[float],
        ends: list[bool],
        parent: list[int],
        token_of: list[int],
        vocab_size: int,
    ) -> "PhraseGraph":
        """The failure links, bonuses and landing states of a trie (breadth-first: a state's failure is
        shallower, so it is complete when the state is reached)."""
        num = len(children)
        failure, bonus, depth = [0] * num, [0.0] * num, [0] * num
        completed = [0.0] * num  # bonuses of the phrases that end on arriving at a state (itself and suffixes)
        landing = list(range(num))
        queue = deque(children[0].values())
        while queue:
            state = queue.popleft()
            up = parent[state]
            bonus[state] = bonus[up] + token_score[state]
            depth[state] = depth[up] + 1
            if up != 0:
                token = token_of[state]
                fallback = failure[up]
                while token not in children[fallback] and fallback != 0:
                    fallback = failure[fallback]
                failure[state] = children[fallback].get(token, 0)
            completed[state] = (bonus[state] if ends[state] else 0.0) + completed[failure[state]]
            if ends[state] and not children[state]:
                landing[state] = landing[failure[state]]
            queue.extend(children[state].values())
        keys = sorted(
            (state * vocab_size + token, child) for state in range(num) for token, child in children[state].items()
        )
        gain = [bonus[landing[s]] + completed[s] for s in range(num)]
        root_targets = [0] * vocab_size
        for token, child in children[0].items():
            root_targets[token] = child
        return cls(
            vocab_size=vocab_size,
            arc_keys=torch.tensor([k for k, _ in keys], dtype=torch.long),
            arc_targets=torch.tensor([c for _, c in keys], dtype=torch.long),
            failure=torch.tensor(failure, dtype=torch.long),
            bonus=torch.tensor(bonus, dtype=torch.float32),
            landing=torch.tensor(landing, dtype=torch.long),
            gain=torch.tensor(gain, dtype=torch.float32),
            depth=torch.tensor(depth, dtype=torch.long),
            root_targets=torch.tensor(root_targets, dtype=torch.long),
        )

    @property
    def num_states(self) -> int:
        return len(self.failure)

    def to(self, device: torch.device) -> "PhraseGraph":
        """The graph with its tensors on `device`."""
        moved = {name: getattr(self, name).to(device) for name in TENSOR_FIELDS}
        return PhraseGraph(vocab_size=self.vocab_size, **moved)

    def goto(self, states: torch.Tensor) -> torch.Tensor:
        """(N,) states -> (N, V) the trie state each token leads to (failure links followed down to the root's
        row)."""
        vocab = self.vocab_size
        tokens = torch.arange(vocab, device=states.device)
        current = states[:, None].expand(-1, vocab)  # (N, V)
        target = self.root_targets.expand_as(current)
        open_ = current != 0
        for _ in range(int(self.depth[states].max()) if len(states) else 0):
            keys = current * vocab + tokens
            index = torch.searchsorted(self.arc_keys, keys).clamp(max=len(self.arc_keys) - 1)
            found = open_ & (self.arc_keys[index] == keys)
            target = torch.where(found, self.arc_targets[index], target)
            current = self.failure[current]
            open_ = open_ & ~found & (current != 0)
        return target


TENSOR_FIELDS = ("arc_keys", "arc_targets", "failure", "bonus", "landing", "gain", "depth", "root_targets")


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
        cls, phrases: Sequence[Phrase | str], tokenizer: PhraseTokenizer, hotwords_score: float = 1.5
    ) -> "PhraseBoosting":
        """Boosting of `phrases` (text, or `Phrase` with its own score) tokenised by `tokenizer`, each token of a
        phrase scoring its score or `hotwords_score` (sherpa-onnx's default is 1.5); errors as `phrase_tokens`."""
        graph = PhraseGraph.build(phrase_tokens(phrases, tokenizer, hotwords_score), tokenizer.vocab_size)
        return cls(graph, tokenizer.blank_id)

    @classmethod
    def from_file(
        cls, path: str | os.PathLike, tokenizer: PhraseTokenizer, hotwords_score: float = 1.5
    ) -> "PhraseBoosting":
        """Boosting of the phrases of a sherpa-onnx hotwords file (`read_hotwords`); errors name file and line."""
        phrases = read_hotwords(path)
        if not phrases:
            raise ValueError(f"{path}: no phrases (the hotwords file has only blank lines)")
        return cls.from_phrases(phrases, tokenizer, hotwords_score)

    def on(self, device: torch.device) -> PhraseGraph:
        """The graph on `device` (moved once)."""
        if device not in self._on_device:
            self._on_device[device] = self.graph.to(device)
        return self._on_device[device]

    def initial_states(self, num: int, device: torch.device) -> torch.Tensor:
        return torch.zeros(num, dtype=torch.long, device=device)

    def advance(self, states: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        graph = self.on(states.device)
        arrive = graph.goto(states)  # (N, V)
        scores = graph.gain[arrive] - graph.bonus[states][:, None]
        next_states = graph.landing[arrive]
        scores[:, self.blank_id] = 0.0
        next_states[:, self.blank_id] = states
        return scores, next_states

    def final(self, states: torch.Tensor) -> torch.Tensor:
        return -self.on(states.device).bonus[states]
