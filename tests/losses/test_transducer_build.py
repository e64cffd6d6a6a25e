"""The extension build never hangs and is shared by every checkout of the same sources (subprocesses, each with
a private extension cache; every wait has a timeout, so a regression fails instead of hanging the suite)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 600  # a build takes ~10-60 s here; a hang waits forever

# Builds (or finds) the CPU library in argv[1] (or the cache) and prints [kind, path, built] per library.
BUILD = (
    "import json, sys; from pathlib import Path; from asr_plugin.losses.build import build; "
    "print(json.dumps([[lib.spec.kind, str(lib.path), lib.built] for lib in build(out=Path(sys.argv[1]) if len(sys.argv) > 1 else None)]))"
)
# Computes a loss (loading the extension the usual way); prints the library's path, whether it was built, the loss
# and where the package was imported from.
LOSS = (
    "import json, torch; from asr_plugin.losses import transducer_loss; from asr_plugin.losses.extension import load_libraries; "
    "loss = transducer_loss(torch.randn(1, 3, 2, 4), torch.ones(1, 1, dtype=torch.long), torch.tensor([3]), torch.tensor([1])); "
    "from asr_plugin.losses import extension; "
    "(lib,) = load_libraries(); print(json.dumps([str(lib.path), lib.built, float(loss), extension.__file__]))"
)

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("processes")]


def environment(extensions: Path, pythonpath: Path = REPO, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ASR_PLUGIN_EXTENSION_DIR"}
    env.update(TORCH_EXTENSIONS_DIR=str(extensions), PYTHONPATH=str(pythonpath), OMP_NUM_THREADS="1", **extra)
    return env


def run_python(code: str, env: dict, *args: str, cwd: Path = REPO) -> list:
    process = subprocess.run(
        [sys.executable, "-c", code, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S
    )
    assert process.returncode == 0, process.stderr[-3000:]
    return json.loads(process.stdout.strip().splitlines()[-1])


def test_a_build_killed_half_way_does_not_block_the_next(tmp_path):
    extensions = tmp_path / "ext"
    cache = extensions / "asr_plugin"
    env = environment(extensions)
    builder = subprocess.Popen(
        [sys.executable, "-c", BUILD],
        env=env,
        cwd=REPO,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        # the compiler is running once ninja's build file is written in the private build directory
        while not list(cache.glob(".build-*/build.ninja")):
            assert builder.poll() is None, "the build ended before it could be killed"
            assert time.monotonic() < deadline, "no build started within 120 s"
            time.sleep(0.05)
        time.sleep(1.0)
    finally:
        os.killpg(builder.pid, signal.SIGKILL)  # the builder and its ninja/compiler children
        builder.wait(timeout=30)
    assert not list(cache.glob("*.so")) and list(cache.glob(".build-*")) and list(cache.glob("*.lock"))
    path, built, loss, _ = run_python(LOSS, env)
    assert built and Path(path).parent == cache and loss > 0
    assert not list(cache.glob(".build-*")), "the dead builder's directory is removed by the next build"


@pytest.fixture(scope="module")
def concurrent_builds(tmp_path_factory) -> tuple[Path, list]:
    """Two processes build the CPU library into one fresh directory at the same time."""
    out = tmp_path_factory.mktemp("prebuilt")
    env = environment(tmp_path_factory.mktemp("unused-cache"))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: run_python(BUILD, env, str(out)), range(2)))
    return out, results


def test_two_concurrent_builds_both_succeed_and_build_once(concurrent_builds):
    out, results = concurrent_builds
    (first,), (second,) = results
    assert first[:2] == second[:2] and first[0] == "cpu" and Path(first[1]).parent == out
    assert sorted([first[2], second[2]]) == [False, True], "the second waits for the first's lock, then loads its file"
    assert [p.name for p in out.glob("*.so")] == [Path(first[1]).name] and not list(out.glob(".build-*"))


def test_the_prebuilt_directory_variable_is_used(concurrent_builds, tmp_path):
    out, ((_, library, _),) = concurrent_builds[0], concurrent_builds[1][0]
    cache = tmp_path / "cache"
    path, built, *_ = run_python(LOSS, environment(cache, ASR_PLUGIN_EXTENSION_DIR=str(out)))
    assert (path, built) == (library, False) and not cache.exists()


def test_the_ahead_of_time_command_reports_where_the_library_is(concurrent_builds):
    out, ((_, library, _),) = concurrent_builds[0], concurrent_builds[1][0]
    process = subprocess.run(
        [sys.executable, "-m", "asr_plugin.losses.build", "--out", str(out)],
        env=environment(out),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout.strip() == f"cpu: {library} (found)"


def test_another_checkout_of_the_same_sources_reuses_the_library(concurrent_builds, tmp_path):
    """build.ninja once held absolute paths, so checkouts in other folders rebuilt the same directory in turn."""
    out, ((_, library, _),) = concurrent_builds[0], concurrent_builds[1][0]
    checkout = tmp_path / "other-checkout"
    shutil.copytree(REPO / "asr_plugin", checkout / "asr_plugin", ignore=shutil.ignore_patterns("__pycache__"))
    before = os.stat(library)
    root = tmp_path / "extensions"  # $TORCH_EXTENSIONS_DIR whose asr_plugin/ cache is `out`
    root.mkdir()
    (root / "asr_plugin").symlink_to(out)
    path, built, _, package = run_python(LOSS, environment(root, pythonpath=checkout), cwd=tmp_path)
    after = os.stat(library)
    assert Path(path).name == Path(library).name and not built and Path(package).is_relative_to(checkout)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
