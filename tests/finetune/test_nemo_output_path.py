"""``export_nemo.py x out_dir/`` writes ``out_dir/x.nemo``; `export_nemo` refuses a directory as its file."""

from __future__ import annotations

import pytest

from asr_plugin.formats import export_nemo
from asr_plugin.formats.nemo.output_path import nemo_output_path


def test_a_directory_gets_the_source_stem(tmp_path):
    existing = tmp_path / "exported"
    existing.mkdir()
    assert nemo_output_path("run/checkpoints/last.ckpt", existing) == existing / "last.nemo"
    assert nemo_output_path("run/last.ckpt", f"{tmp_path}/new_dir/") == tmp_path / "new_dir" / "last.nemo"
    assert (tmp_path / "new_dir").is_dir()
    assert nemo_output_path("run/last.ckpt", tmp_path / "model.nemo") == tmp_path / "model.nemo"


def test_the_source_is_never_the_output(tmp_path):
    source = tmp_path / "model.nemo"
    source.write_bytes(b"the user's file")
    with pytest.raises(ValueError, match="would be the source itself"):
        nemo_output_path(source, tmp_path)
    assert source.read_bytes() == b"the user's file"


def test_export_nemo_refuses_a_directory_before_reading_anything(tmp_path):
    with pytest.raises(ValueError, match=rf"export_nemo: {tmp_path} is a directory; name the \.nemo file"):
        export_nemo(tmp_path / "missing.ckpt", tmp_path)
