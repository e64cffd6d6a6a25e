"""Where a corpus is read and where everything made from it is written: the one place artefact paths
are derived (manifests, skip lists, tokenizer, feature statistics).

The corpus directory (`root`) is only ever read, so it may be read-only or shared by many users; the
artefacts go to `work_dir` (by default under the project's own ``data/``, see conf/data/*.yaml), which may
be a shared file system that every node of a job sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

STATS_FILE = "feature_stats.json"


def tokenizer_file_name(tokenizer_type: str, vocab_size: int) -> str:
    """E.g. "tokenizer_bpe500.model"."""
    return f"tokenizer_{tokenizer_type}{vocab_size}.model"


@dataclass(frozen=True)
class CorpusLayout:
    """Paths of one corpus and its artefacts.

    Args:
        root: the corpus directory (only read), or None for sources read from manifests anywhere (NeMo,
            lhotse: their manifests and audio are only read, and the work directory's names are its own).
        work_dir: where manifests, tokenizer and statistics are written; never inside `root`.
    """

    root: Path | None
    work_dir: Path

    def __post_init__(self) -> None:
        work_dir = Path(self.work_dir).absolute()
        object.__setattr__(self, "work_dir", work_dir)
        if self.root is None:
            return
        root = Path(self.root).absolute()
        resolved_root, resolved_work = root.resolve(), work_dir.resolve()
        if resolved_work == resolved_root or resolved_root in resolved_work.parents:
            raise ValueError(
                f"work_dir {work_dir} is inside the corpus directory {root}: data preparation never "
                "writes into the corpus; set data.work_dir to a directory outside it"
            )
        object.__setattr__(self, "root", root)

    def manifest(self, split: str) -> Path:
        """`<work_dir>/<split>.jsonl`."""
        return self.work_dir / f"{split}.jsonl"

    def skip_list(self, split: str) -> Path:
        """`<work_dir>/<split>.skipped.tsv`: files left out of the split's manifest (path<TAB>reason)."""
        return self.work_dir / f"{split}.skipped.tsv"

    def origin(self, split: str) -> Path:
        """`<work_dir>/<split>.origin.json`: what the split's manifest was made from (`DataSource.origin`)."""
        return self.work_dir / f"{split}.origin.json"

    def tokenizer(self, tokenizer_type: str, vocab_size: int) -> Path:
        """`<work_dir>/tokenizer_<type><V>.model`."""
        return self.work_dir / tokenizer_file_name(tokenizer_type, vocab_size)

    @property
    def stats(self) -> Path:
        """`<work_dir>/feature_stats.json`."""
        return self.work_dir / STATS_FILE

    @property
    def preparation_failure(self) -> Path:
        """Written when rank 0's preparation fails, so that the ranks waiting for it stop waiting."""
        return self.work_dir / ".preparation_failed.json"
