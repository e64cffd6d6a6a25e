"""`read_nemo` on hostile or damaged `.nemo` files: the error names the file and the member, and nothing big is
read into memory before it is refused."""

from __future__ import annotations

import io
import tarfile
import tracemalloc

import pytest
import torch
import yaml

from asr_plugin.formats.nemo.archive import MAX_MEMBER_BYTES, MAX_MEMBERS, read_nemo

CONFIG = yaml.safe_dump({"encoder": {"d_model": 4}}).encode()


def weights_bytes() -> bytes:
    buffer = io.BytesIO()
    torch.save({"encoder.weight": torch.zeros(2)}, buffer)
    return buffer.getvalue()


def write_tar(path, members: dict[str, bytes], mode: str = "w"):
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def test_a_well_formed_archive_reads(tmp_path):
    archive = read_nemo(
        write_tar(
            tmp_path / "ok.nemo",
            {
                "./model_config.yaml": CONFIG,
                "./model_weights.ckpt": weights_bytes(),
                "./abc_tokenizer.model": b"pieces",
            },
        )
    )
    assert archive.config == {"encoder": {"d_model": 4}}
    assert archive.files == {"abc_tokenizer.model": b"pieces"}
    assert torch.equal(archive.state_dict["encoder.weight"], torch.zeros(2))


def test_a_member_over_the_limit_is_refused_before_it_is_read(tmp_path):
    # 1 MiB over the limit, compressed to a few hundred KiB: what a small download could expand to
    path = write_tar(
        tmp_path / "bomb.nemo",
        {
            "./model_config.yaml": CONFIG,
            "./model_weights.ckpt": weights_bytes(),
            "./huge_tokenizer.model": bytes(MAX_MEMBER_BYTES + 2**20),
        },
        "w:gz",
    )
    assert path.stat().st_size < 2**20
    tracemalloc.start()
    try:
        with pytest.raises(
            ValueError,
            match=r"bomb\.nemo: member \./huge_tokenizer\.model is 68,157,440 bytes, "
            r"over the limit of 67,108,864",
        ):
            read_nemo(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB were allocated while refusing the member"


def test_the_limit_is_an_argument(tmp_path):
    path = write_tar(tmp_path / "small.nemo", {"./model_config.yaml": CONFIG, "./model_weights.ckpt": weights_bytes()})
    with pytest.raises(ValueError, match="model_config.yaml is .* over the limit of 8 "):
        read_nemo(path, max_member_bytes=8)
    assert read_nemo(path, max_member_bytes=len(CONFIG)).config == {"encoder": {"d_model": 4}}


@pytest.mark.parametrize("second", ["./sub/model_config.yaml", "./sub/model_weights.ckpt", "other/tokenizer.model"])
def test_two_members_of_one_name_are_refused(tmp_path, second):
    members = {
        "./model_config.yaml": CONFIG,
        "./model_weights.ckpt": weights_bytes(),
        "./tokenizer.model": b"a",
        second: b"garbage",
    }
    with pytest.raises(ValueError, match=rf"dup\.nemo: members \./\S+ and {second} share the name"):
        read_nemo(write_tar(tmp_path / "dup.nemo", members))


@pytest.mark.parametrize("config", [b"encoder: [unclosed\n  - : :", b"\xff\xfe\x00garbage"])
def test_a_damaged_config_names_the_file_and_member(tmp_path, config):
    path = write_tar(
        tmp_path / "damaged.nemo", {"./model_config.yaml": config, "./model_weights.ckpt": weights_bytes()}
    )
    with pytest.raises(ValueError, match=r"damaged\.nemo: model_config\.yaml is not (valid YAML|UTF-8 text)"):
        read_nemo(path)


def _entry_points_refuse(path, message: str) -> None:
    """Every way in through the seam names the file: the format is still found (claims never fails) and each
    read refuses with one line, never a bare tarfile error."""
    from asr_plugin.formats import format_of, read_model, read_resumable_checkpoint, read_settings, read_weights

    assert format_of(path).name == "nemo"
    for read in (read_model, read_settings, read_weights):
        with pytest.raises(ValueError, match=message) as refusal:
            read(path)
        assert "\n" not in str(refusal.value)
    with pytest.raises(ValueError, match=rf"{path} is a NeMo \.nemo file, not a training checkpoint"):
        read_resumable_checkpoint(path)  # ckpt_path: pointed to +finetune=from_nemo, which then says the above


def test_a_member_cut_short_is_named_at_every_entry_point(tmp_path):
    whole = write_tar(tmp_path / "whole.nemo", {"./model_config.yaml": CONFIG, "./model_weights.ckpt": weights_bytes()})
    cut = tmp_path / "cut.nemo"
    cut.write_bytes(whole.read_bytes()[: 512 * 3 + 100])  # in the middle of the weights member
    _entry_points_refuse(cut, rf"{cut}: (a damaged \.nemo archive, cut short|.*cannot be read)")


def test_an_archive_of_too_many_members_is_refused_after_listing_a_thousand(tmp_path):
    empties = {f"./empty{index}": b"" for index in range(MAX_MEMBERS)}
    path = write_tar(tmp_path / "many.nemo", {**empties, "./model_config.yaml": CONFIG, "./model_weights.ckpt": b""})
    _entry_points_refuse(path, rf"{path}: the archive holds more than {MAX_MEMBERS:,} members")
