"""The recipe's ``train.py`` on two "nodes" of one CPU process each (Lightning DDP, gloo on loopback), as a user
launches a two-node run (tests/ is on sys.path: see tests/conftest.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
TRAIN = REPO_ROOT / "recipes" / "librispeech" / "train.py"
# a launcher's variables of this process would override the nodes' own
LAUNCHER_VARIABLES = ("RANK", "LOCAL_RANK", "NODE_RANK", "WORLD_SIZE", "SLURM_JOB_ID", "SLURM_PROCID", "ASR_RUN_ID")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a gloo rendezvous)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_two_nodes(overrides: list[str], cwd: Path, run_id: str, timeout_s: float) -> list[tuple[str, str]]:
    """Runs ``train.py <overrides> trainer.num_nodes=2 ...`` as node 0 and node 1 (one thread each, run
    directory `run_id`), waits for both and returns their (stdout, stderr); AssertionError with the end of a
    failed node's output; a node still running after `timeout_s` is killed."""
    overrides = [*overrides, "trainer.num_nodes=2", "trainer.devices=1", "+trainer.strategy=ddp"]
    env = {key: value for key, value in os.environ.items() if key not in LAUNCHER_VARIABLES}
    env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), ASR_RUN_ID=run_id)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    nodes = [
        subprocess.Popen(
            [sys.executable, str(TRAIN), *overrides],
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**env, "NODE_RANK": str(rank)},
        )
        for rank in (0, 1)
    ]
    outputs = []
    try:
        outputs = [node.communicate(timeout=timeout_s) for node in nodes]
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
    for rank, (node, (out, err)) in enumerate(zip(nodes, outputs)):
        assert node.returncode == 0, f"node {rank} exited {node.returncode}:\n{out[-2000:]}{err[-3000:]}"
    return outputs
