"""Hostile `.nemo` files: the config is plain data (no resolver runs, no alias expands), every declared size is
checked against the stored weights' shapes before anything is allocated, and NaN weights are refused. The memory
bombs run in a child Python under an address-space limit (tests/memory_limit.py)."""

from __future__ import annotations

import io
import tarfile
import time
import zipfile

import pytest
import torch
import yaml
from memory_limit import refusals
from nemo_models import write_synthetic_nemo
from omegaconf import OmegaConf

from asr_plugin.formats.nemo import import_nemo, nemo_transducer_kwargs, read_nemo
from asr_plugin.formats.nemo.plain_config import MAX_CONFIG_NODES, load_yaml_data, resolve_references

WEIGHTS = "model_weights.ckpt"


def write_members(path, members: dict[str, bytes], mode: str = "w"):
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def members_of(path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {member.name[2:]: tar.extractfile(member).read() for member in tar.getmembers() if member.isfile()}


def with_config(path, edit, out):
    """A copy of the archive `path` whose config `edit(config)` changed (the weights stay as they were)."""
    members = members_of(path)
    config = yaml.safe_load(members["model_config.yaml"])
    edit(config)
    return write_members(out, {**members, "model_config.yaml": yaml.safe_dump(config).encode()})


@pytest.fixture(scope="module")
def nemo_file(tmp_path_factory):
    path, _ = write_synthetic_nemo(tmp_path_factory.mktemp("hostile"))
    return path


# case 1: interpolations are data
def test_a_resolver_in_a_read_section_is_refused_and_never_runs(nemo_file, tmp_path, monkeypatch):
    calls = []
    OmegaConf.register_new_resolver("probe_i25", lambda *args: calls.append(args) or 1, replace=True)
    target = tmp_path / "made_by_the_file"
    path = with_config(
        nemo_file, lambda c: c["encoder"].update(n_heads=f"${{probe_i25:{target}}}"), tmp_path / "r.nemo"
    )
    with pytest.raises(
        ValueError,
        match=r"r\.nemo: model_config\.yaml: encoder\.n_heads='\$\{probe_i25:.*' looks "
        r"like an interpolation",
    ):
        import_nemo(path)
    assert calls == [] and not target.exists()


def test_resolvers_outside_the_read_sections_stay_strings(nemo_file, tmp_path, monkeypatch):
    monkeypatch.setenv("I25_SECRET", "value-from-the-environment")
    calls = []
    OmegaConf.register_new_resolver("probe_i25", lambda *args: calls.append(args) or 1, replace=True)

    def edit(config):
        config["exp_dir"] = "${probe_i25:/somewhere}"
        config["secret"] = "${oc.env:I25_SECRET}"

    archive = read_nemo(with_config(nemo_file, edit, tmp_path / "s.nemo"), weights=False)
    assert archive.config["exp_dir"] == "${probe_i25:/somewhere}"
    assert archive.config["secret"] == "${oc.env:I25_SECRET}"
    assert calls == []


def test_model_references_resolve_as_plain_copies():
    config = {"a": {"b": 3}, "c": "${model.a.b}", "d": "${a}", "e": "x ${a.b}", "f": "${trainer.max_steps}"}
    resolved = resolve_references(config, "f")
    assert resolved == {"a": {"b": 3}, "c": 3, "d": {"b": 3}, "e": "x ${a.b}", "f": "${trainer.max_steps}"}
    assert resolved["d"] is not resolved["a"]


def test_a_reference_cycle_is_refused():
    with pytest.raises(ValueError, match=r"cfg: a='\$\{b\}' is a chain of more than 32 references"):
        resolve_references({"a": "${b}", "b": "${a}"}, "cfg")


def test_references_that_expand_past_the_node_budget_are_refused():
    config = {"l0": list(range(10))}
    for level in range(1, 8):  # 10^7 nodes once expanded, a few hundred bytes as written
        config[f"l{level}"] = [f"${{l{level - 1}}}"] * 10
    start = time.perf_counter()
    with pytest.raises(ValueError, match=f"more than {MAX_CONFIG_NODES:,} nodes"):
        resolve_references(config, "cfg")
    assert time.perf_counter() - start < 30


# case 2: YAML aliases
def billion_laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_yaml_aliases_expand_as_copies_within_the_budget():
    config = resolve_references(load_yaml_data(billion_laughs(3), "cfg"), "cfg")
    assert len(config["a2"]) == 10 and config["a2"][0] == config["a1"] and config["a2"][0] is not config["a1"]


def test_a_recursive_alias_is_refused():
    with pytest.raises(ValueError, match=r"cfg: the config is nested too deeply"):
        resolve_references(load_yaml_data("a: &a [*a]\n", "cfg"), "cfg")


def laughs_nodes(levels: int) -> int:
    """The nodes of `billion_laughs(levels)` once expanded: the top mapping, and level i's list of 10 of level i-1's."""
    size, total = 11, 1  # a0: a list of 10 strings
    for _ in range(levels):
        total += size
        size = 1 + 10 * size
    return total


@pytest.mark.parametrize("levels", [8, 13])  # 10^7 and 10^12 nodes once expanded
def test_an_alias_bomb_is_refused_from_its_counted_size_before_any_copy(levels):
    config = load_yaml_data(billion_laughs(levels), "cfg")
    # the exact size: only the count over the shared objects knows it (a copy stops at the budget)
    with pytest.raises(ValueError, match=f"more than {MAX_CONFIG_NODES:,} nodes \\({laughs_nodes(levels):,}:"):
        resolve_references(config, "cfg")


def test_a_reference_bomb_is_refused_from_its_counted_size():
    config = {"l0": list(range(10))}
    for level in range(1, 13):  # 10^12 nodes once expanded
        config[f"l{level}"] = [f"${{l{level - 1}}}"] * 10
    expected, size = 1 + 11, 11
    for _ in range(12):
        size = 1 + 10 * (1 + size)  # a list of 10 references, each a node and a copy of its target
        expected += size
    with pytest.raises(ValueError, match=f"more than {MAX_CONFIG_NODES:,} nodes \\({expected:,}:"):
        resolve_references(config, "cfg")


def test_a_billion_laughs_config_is_refused_under_a_memory_limit(tmp_path):
    path = write_members(
        tmp_path / "laughs.nemo", {"model_config.yaml": billion_laughs(12).encode(), WEIGHTS: b"unused"}
    )
    (message,) = refusals(
        "from asr_plugin.formats.nemo import read_nemo",
        [f"read_nemo({str(path)!r}, weights=False)"],
        limit_bytes=6 * 2**30,
    )
    assert f"laughs.nemo: model_config.yaml: the config expands to more than {MAX_CONFIG_NODES:,} nodes" in message


# cases 3 and smaller: declared sizes against stored shapes, before allocation
HUGE = {"d_model": 32768, "n_layers": 200000}


def test_huge_declared_sizes_are_refused_by_key_under_a_memory_limit(nemo_file, tmp_path):
    def edit(config):
        config["encoder"].update(HUGE)
        config["decoder"]["prednet"]["pred_hidden"] = 200000

    path = with_config(nemo_file, edit, tmp_path / "huge.nemo")
    (message,) = refusals("from asr_plugin.formats.nemo import import_nemo", [f"import_nemo({str(path)!r})"])
    assert "huge.nemo" in message and "d_model=32768 is outside [1, 16384]" in message


@pytest.mark.slow  # a child Python under a memory limit
def test_in_bound_sizes_that_the_weights_do_not_hold_are_refused_before_building(nemo_file, tmp_path):
    # 8192 x 8192 attention in 200 layers: hundreds of GB if the model were built first
    path = with_config(nemo_file, lambda c: c["encoder"].update(d_model=8192, n_layers=200), tmp_path / "big.nemo")
    messages = refusals(
        "from asr_plugin.formats.nemo import import_nemo, nemo_state_dict, nemo_transducer_kwargs",
        [f"{entry}({str(path)!r})" for entry in ("import_nemo", "nemo_transducer_kwargs", "nemo_state_dict")],
    )
    for message in messages:
        assert message.startswith(f"{path}: weight encoder.")
        assert "but the declared architecture (vocab_size=" in message and "d_model=8192" in message


def test_a_wrong_shaped_weight_names_the_key_and_both_shapes(nemo_file, tmp_path):
    members = members_of(nemo_file)
    state = torch.load(io.BytesIO(members[WEIGHTS]), weights_only=True)
    key = "joint.enc.weight"
    state[key] = torch.zeros(state[key].shape[0] + 1, state[key].shape[1])
    weights = io.BytesIO()
    torch.save(state, weights)
    path = write_members(tmp_path / "shape.nemo", {**members, WEIGHTS: weights.getvalue()})
    expected = (state[key].shape[0] - 1, state[key].shape[1])
    with pytest.raises(
        ValueError,
        match=rf"shape\.nemo: weight joint\.encoder_proj\.weight has shape "
        rf"\({expected[0] + 1}, {expected[1]}\) but .* implies \({expected[0]}, "
        rf"{expected[1]}\)",
    ):
        import_nemo(path)


@pytest.mark.parametrize(
    "section, key, value, message",
    [
        ("encoder", "d_model", -4, r"d_model=-4 is outside \[1, 16384\]"),
        ("encoder", "n_layers", 0, r"num_layers=0 is outside \[1, 256\]"),
        ("preprocessor", "window_size", -0.025, r"preprocessor\.window_size \(in samples\)=-400 is outside"),
        ("preprocessor", "features", 2.5, r"preprocessor\.features=2\.5 is not a whole number"),
    ],
)
def test_negative_or_fractional_sizes_name_their_key(nemo_file, tmp_path, section, key, value, message):
    path = with_config(nemo_file, lambda c: c[section].update({key: value}), tmp_path / "neg.nemo")
    with pytest.raises(ValueError, match=message):
        import_nemo(path)


def test_nan_weights_are_refused_by_name(nemo_file, tmp_path):
    members = members_of(nemo_file)
    state = torch.load(io.BytesIO(members[WEIGHTS]), weights_only=True)
    state["joint.pred.bias"][1] = float("nan")
    state["joint.pred.bias"][2] = float("inf")
    weights = io.BytesIO()
    torch.save(state, weights)
    path = write_members(tmp_path / "nan.nemo", {**members, WEIGHTS: weights.getvalue()})
    with pytest.raises(
        ValueError,
        match=r"nan\.nemo: model_weights\.ckpt: weight joint\.pred\.bias holds 2 NaN or "
        r"infinite value\(s\)",
    ):
        import_nemo(path)


def test_a_gzip_weights_member_padded_to_gigabytes_is_refused_before_it_is_read(nemo_file, tmp_path):
    members = members_of(nemo_file)
    weights = io.BytesIO(members[WEIGHTS])
    with zipfile.ZipFile(weights, "a") as archive:  # a record no tensor uses: 64 MiB of zeros
        archive.writestr(f"{archive.namelist()[0].split('/')[0]}/padding", bytes(64 * 2**20))
    path = write_members(tmp_path / "padded.nemo", {**members, WEIGHTS: weights.getvalue()}, "w:gz")
    assert path.stat().st_size < 2**20
    with pytest.raises(
        ValueError,
        match=r"padded\.nemo: model_weights\.ckpt: the file is 67,\d{3},\d{3} bytes but "
        r"its tensors take only [\d,]+: refused before it is read",
    ):
        read_nemo(path)


def test_the_recipe_overrides_are_bounded_too(nemo_file):
    with pytest.raises(ValueError, match=r"\(with the recipe's vocab_size and overrides\): d_model=0 is outside"):
        nemo_transducer_kwargs(nemo_file, d_model=0)
