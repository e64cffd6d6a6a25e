"""``export_nemo.py x out_dir/`` writes ``out_dir/x.nemo``; `export_nemo` refuses a directory as its file, its own
source and an existing file that is not a ``.nemo``."""

from __future__ import annotations

import pytest

from asr_plugin.formats import export_nemo, read_model
from asr_plugin.formats.nemo import write_nemo
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


@pytest.fixture(scope="module")
def nemo_file(tmp_path_factory):
    from nemo_models import write_synthetic_nemo

    return write_synthetic_nemo(tmp_path_factory.mktemp("output_is_input"))[0]


def test_an_output_that_is_the_input_is_refused_by_every_writer(nemo_file):
    """`export_nemo.py X X` would replace X by its own re-export (a training checkpoint: its optimizer and loop
    state lost); the script, `export_nemo` and `write_nemo` of a model read from X all refuse it."""
    import export_nemo as script

    original = nemo_file.read_bytes()
    refusal = rf"export_nemo: the output {nemo_file} is the source {nemo_file} itself"
    with pytest.raises(ValueError, match=refusal):
        script.main([str(nemo_file), str(nemo_file)])
    with pytest.raises(ValueError, match=refusal):
        export_nemo(nemo_file, nemo_file)
    with pytest.raises(ValueError, match=refusal):
        write_nemo(read_model(nemo_file), nemo_file)
    assert nemo_file.read_bytes() == original


def test_an_existing_file_of_another_kind_is_never_replaced(nemo_file, tmp_path):
    checkpoint = tmp_path / "last.ckpt"
    checkpoint.write_bytes(b"a training checkpoint: optimizer, schedule, loop state")
    with pytest.raises(ValueError, match=rf"the output {checkpoint} exists and is not a \.nemo file"):
        export_nemo(nemo_file, checkpoint)
    assert checkpoint.read_bytes() == b"a training checkpoint: optimizer, schedule, loop state"
    again = tmp_path / "again.nemo"
    assert export_nemo(nemo_file, again) == again and export_nemo(nemo_file, again) == again  # a .nemo is replaced
