"""A transformers Parakeet directory's ``tokenizer.json`` (a `tokenizers` model) as a SentencePiece model.

transformers makes a Parakeet tokenizer from NeMo's SentencePiece model (``ParakeetConverter``): a `tokenizers`
BPE (or Unigram) model with SentencePiece's normaliser (its precompiled character map, trailing spaces stripped,
runs of spaces as one ``▁``), a ``Metaspace`` pre-tokenizer and decoder (``▁`` before every word), and the blank
appended as the added token after the last piece. `sentencepiece_model` turns one back into a SentencePiece
model proto that encodes every text as the `tokenizers` model does:

- Unigram: the pieces and their scores, as they are (both search the pieces' best-scoring split);
- BPE: `tokenizers` merges the pair of lowest merge rank, SentencePiece the adjacent pair whose concatenation has
  the highest score. A piece's score is the rank of its first merge, negated; that is the same order when every
  piece's merges are consecutive in the merge list and every split of a piece into two pieces is a merge
  (otherwise SentencePiece would join pairs `tokenizers` never joins). Both are checked.

Everything else the two would do differently is refused, naming the file and the reason: another model type, a
normaliser, pre-tokenizer, decoder or post-processor of another shape, a piece with ``▁`` inside (Metaspace
splits there, SentencePiece does not), user-defined added tokens, no unknown piece, a partial byte fallback.
Unknown characters encode alike (runs of them as one unknown id); decoded, the unknown piece is SentencePiece's
" ⁇ " where `tokenizers` writes nothing. Needs ``protobuf`` (sentencepiece's model proto), not `tokenizers`.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from asr_plugin.formats.json_object import read_json_object
from asr_plugin.text.tokenizer import Tokenizer

TOKENIZER_NAME = "tokenizer.json"
MAX_TOKENIZER_BYTES = 64 * 2**20  # a 8,192-piece BPE tokenizer.json is about 0.5 MB
SPACE = "\u2581"  # "▁", SentencePiece's and Metaspace's word boundary
BYTE_PIECES = [f"<0x{value:02X}>" for value in range(256)]
# SentencePiece's normaliser as transformers' SpmConverter writes it (after an optional Precompiled map)
_SPM_NORMALIZERS = [
    {"type": "Strip", "strip_left": False, "strip_right": True},
    {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": SPACE},
]
_PREPEND = ("always", "first")  # SentencePiece's add_dummy_prefix (one text has one first word)


def _protobuf():
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as err:  # protobuf missing
        raise ImportError(
            f"reading a transformers tokenizer.json needs protobuf ({err}): pip install 'asr_plugin[transformers]'"
        ) from None
    return sentencepiece_model_pb2


def _check_metaspace(node: Any, source: str, part: str) -> None:
    if not isinstance(node, Mapping) or node.get("type") != "Metaspace":
        raise ValueError(f"{source}: {part} {_kind(node)}; read is transformers' Metaspace (SentencePiece's)")
    if node.get("replacement") != SPACE or node.get("prepend_scheme", "always") not in _PREPEND:
        raise ValueError(
            f"{source}: {part} Metaspace(replacement={node.get('replacement')!r}, prepend_scheme="
            f"{node.get('prepend_scheme')!r}); SentencePiece's is replacement '{SPACE}' before the first word"
        )


def _kind(node: Any) -> str:
    return repr(node.get("type")) if isinstance(node, Mapping) else repr(node)


def _charsmap(node: Any, source: str) -> bytes:
    """SentencePiece's precompiled character map of the normaliser `node` (b"" for none)."""
    parts = node.get("normalizers") if isinstance(node, Mapping) and node.get("type") == "Sequence" else None
    charsmap = b""
    if parts and isinstance(parts[0], Mapping) and parts[0].get("type") == "Precompiled":
        charsmap = base64.b64decode(parts[0].get("precompiled_charsmap") or "")
        parts = parts[1:]
    if parts != _SPM_NORMALIZERS:
        raise ValueError(
            f"{source}: normalizer {_kind(node)} is not SentencePiece's (a Precompiled map, trailing spaces stripped, "
            "runs of spaces as one word boundary), which transformers writes for a SentencePiece model"
        )
    return charsmap


def _check_post_processor(node: Any, source: str) -> None:
    """No token added around the text: a post-processor that adds one would put it into every label sequence."""
    if node is None:
        return
    added = node.get("special_tokens") if isinstance(node, Mapping) else None
    single = node.get("single") if isinstance(node, Mapping) else None
    if node.get("type") != "TemplateProcessing" or added or single != [{"Sequence": {"id": "A", "type_id": 0}}]:
        raise ValueError(f"{source}: post_processor {_kind(node)} adds tokens to a text; SentencePiece adds none")


def _pieces(model: Mapping[str, Any], count: int, source: str) -> list[tuple[str, float | None]]:
    """The model's pieces 0..count-1 with their Unigram scores (None for BPE)."""
    if model.get("type") == "Unigram":
        vocab = model.get("vocab")
        if not isinstance(vocab, list) or len(vocab) != count:
            raise ValueError(f"{source}: {len(vocab or [])} Unigram pieces; the config's vocab_size - 1 is {count}")
        return [(str(piece), float(score)) for piece, score in vocab]
    vocab = model.get("vocab")
    if not isinstance(vocab, Mapping) or sorted(vocab.values()) != list(range(count)):
        raise ValueError(f"{source}: the BPE vocabulary's ids are not 0..{count - 1} (the config's vocab_size - 1)")
    return [(piece, None) for piece, _ in sorted(vocab.items(), key=lambda item: item[1])]


def _check_bpe_options(model: Mapping[str, Any], source: str) -> None:
    options = {
        "dropout": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "ignore_merges": False,
        "fuse_unk": True,
    }
    for key, value in options.items():
        got = model.get(key, value)
        if got != value and not (value is None and got == ""):
            raise ValueError(f"{source}: BPE {key}={model.get(key)!r}; SentencePiece's BPE has {key}={value!r}")


def bpe_scores(pieces: Sequence[str], merges: Sequence[Any], mergeable: set[str], source: str) -> list[float]:
    """SentencePiece scores of a `tokenizers` BPE model's `pieces` that merge in the order of its `merges`: a
    merged piece's score is minus the rank of its first merge, a piece no merge makes scores below all of them.
    `mergeable`: the pieces SentencePiece joins pairs into and from (the ordinary ones)."""
    rank_of: dict[str, int] = {}
    merged: set[tuple[str, str]] = set()
    previous = None
    for rank, merge in enumerate(merges):
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        piece = left + right
        if piece not in mergeable or left not in mergeable or right not in mergeable:
            raise ValueError(
                f"{source}: merge {rank} ({left!r} {right!r}) joins or makes a piece not in the vocabulary"
            )
        if piece in rank_of and piece != previous:
            raise ValueError(
                f"{source}: the merges making {piece!r} are not consecutive (merges {rank_of[piece]} and {rank}); "
                "SentencePiece ranks a piece, not a merge"
            )
        rank_of.setdefault(piece, len(rank_of))
        merged.add((left, right))
        previous = piece
    for piece in mergeable:
        for cut in range(1, len(piece)):
            pair = (piece[:cut], piece[cut:])
            if pair[0] in mergeable and pair[1] in mergeable and pair not in merged:
                raise ValueError(
                    f"{source}: no merge joins {pair[0]!r} and {pair[1]!r} into the piece {piece!r}, which "
                    "SentencePiece would join"
                )
    return [-float(rank_of[p]) if p in rank_of else -float(len(rank_of) + i) for i, p in enumerate(pieces)]


def sentencepiece_model(path: Path, count: int) -> bytes:
    """The SentencePiece model (its serialised proto) that encodes as the `tokenizers` model `path` (a Parakeet
    directory's tokenizer.json) with `count` pieces, ids 0..count-1 (the blank, the added token with id `count`,
    is left out: our tokenizers add it). ValueError naming the file and what SentencePiece would do differently."""
    source = str(path)
    node = read_json_object(path, MAX_TOKENIZER_BYTES, "a transformers Parakeet directory with a tokenizer")
    model = node.get("model")
    kind = model.get("type") if isinstance(model, Mapping) else None
    if kind not in ("BPE", "Unigram"):
        raise ValueError(f"{source}: model type {kind!r}; SentencePiece models are 'BPE' or 'Unigram'")
    charsmap = _charsmap(node.get("normalizer"), source)
    _check_metaspace(node.get("pre_tokenizer"), source, "pre_tokenizer")
    if node.get("pre_tokenizer", {}).get("split", True) is not True:
        raise ValueError(f"{source}: pre_tokenizer Metaspace(split=false); SentencePiece's pieces stop at a word")
    _check_metaspace(node.get("decoder"), source, "decoder")
    _check_post_processor(node.get("post_processor"), source)
    pieces = _pieces(model, count, source)
    names = [piece for piece, _ in pieces]
    if len(set(names)) != count:
        raise ValueError(f"{source}: a piece appears twice in the vocabulary")
    special = set()
    for token in node.get("added_tokens") or []:
        token_id, content = token.get("id"), token.get("content")
        if token_id == count:
            continue  # the blank
        if not isinstance(token_id, int) or not 0 <= token_id < count or names[token_id] != content:
            raise ValueError(f"{source}: added token {content!r} (id {token_id}) is not its piece in the vocabulary")
        if not token.get("special"):
            raise ValueError(
                f"{source}: user-defined token {content!r}: SentencePiece matches those in the text differently"
            )
        special.add(token_id)
    unk = model.get("unk_id") if kind == "Unigram" else {n: i for i, n in enumerate(names)}.get(model.get("unk_token"))
    if not isinstance(unk, int) or not 0 <= unk < count:
        raise ValueError(f"{source}: no unknown piece; SentencePiece needs one")
    byte_ids = {names.index(b) for b in BYTE_PIECES if b in names}
    if byte_ids and (len(byte_ids) != len(BYTE_PIECES) or not model.get("byte_fallback")):
        raise ValueError(
            f"{source}: {len(byte_ids)} of the 256 byte pieces with byte_fallback={model.get('byte_fallback')}"
        )
    ordinary = {names[i] for i in range(count) if i not in special | byte_ids | {unk}}
    inside = next((p for p in ordinary if SPACE in p[1:]), None)
    if inside is not None:
        raise ValueError(f"{source}: the piece {inside!r} has '{SPACE}' inside; Metaspace splits there")
    if kind == "BPE":
        _check_bpe_options(model, source)
        scores = bpe_scores(names, model.get("merges") or [], ordinary, source)
    else:
        scores = [score for _, score in pieces]
    return _proto(names, scores, kind, unk, special, byte_ids, charsmap)


def _proto(names, scores, kind, unk, special, byte_ids, charsmap) -> bytes:
    pb = _protobuf()
    proto = pb.ModelProto()
    trainer = proto.trainer_spec
    trainer.model_type = pb.TrainerSpec.BPE if kind == "BPE" else pb.TrainerSpec.UNIGRAM
    trainer.vocab_size = len(names)
    trainer.unk_id, trainer.bos_id, trainer.eos_id, trainer.pad_id = unk, -1, -1, -1
    trainer.byte_fallback = bool(byte_ids)
    normalizer = proto.normalizer_spec
    normalizer.name = "precompiled" if charsmap else "identity"
    normalizer.precompiled_charsmap = charsmap
    normalizer.add_dummy_prefix = normalizer.remove_extra_whitespaces = normalizer.escape_whitespaces = True
    types = pb.ModelProto.SentencePiece
    for index, (name, score) in enumerate(zip(names, scores)):
        piece = proto.pieces.add(piece=name, score=score)
        if index == unk:
            piece.type = types.UNKNOWN
        elif index in special:
            piece.type = types.CONTROL
        elif index in byte_ids:
            piece.type = types.BYTE
    return proto.SerializeToString()


def read_parakeet_tokenizer(directory: Path, vocab_size: int) -> Tokenizer | None:
    """The tokenizer of a Parakeet directory (None without a tokenizer.json): its SentencePiece model with our
    blank policy (the blank, transformers' last id `vocab_size` - 1, is our 0: their token k is our k + 1)."""
    path = directory / TOKENIZER_NAME
    if not path.exists():
        return None
    return Tokenizer(sentencepiece_model(path, vocab_size - 1), convention="nemo")
