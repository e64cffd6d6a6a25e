"""The training smoke's result file (``smoke.json``) and its table; no heavy imports, so the GPU check's
runner renders it without loading Lightning.

Schema (every key always present; measurements None where a run did not get that far)::

    {"meta": {...},
     "runs": [{"model", "vocab_size", "mode", "batch", "steps", "status" ("ok", "oom", "error", "skipped"),
               "seconds", "utterances_per_step", "utterances_per_s", "audio_s_per_s", "peak_mib",
               "loss_first", "loss_last", "loss_finite", "error"}],
     "searches": [{"model", "vocab_size", "mode", "start", "cap", "largest_fit", "smallest_oom",
                   "trials": [[batch, "fits" | "oom"], ...], "stopped"}]}
"""

from __future__ import annotations

from typing import Any


def _number(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def render_results(results: dict) -> str:
    """The smoke's table: throughput runs and batch searches."""
    lines = [
        f"{'model':<18} {'mode':<10} {'batch':>5} {'steps':>5} {'status':<7} {'utt/step':>8} {'utt/s':>7} "
        f"{'audio s/s':>9} {'peak MiB':>9} {'loss first':>10} {'last':>8} {'finite':>6}"
    ]
    for run in results["runs"]:
        finite = "-" if run["loss_finite"] is None else ("yes" if run["loss_finite"] else "NO")
        lines.append(
            f"{run['model']:<18} {run['mode']:<10} {run['batch']:>5} {run['steps']:>5} {run['status']:<7} "
            f"{_number(run['utterances_per_step'], '.1f'):>8} {_number(run['utterances_per_s'], '.2f'):>7} "
            f"{_number(run['audio_s_per_s'], '.0f'):>9} {_number(run['peak_mib'], '.0f'):>9} "
            f"{_number(run['loss_first'], '.2f'):>10} {_number(run['loss_last'], '.2f'):>8} {finite:>6}"
            + (f"  {run['error']}" if run["error"] else "")
        )
    if results["searches"]:
        lines += ["", f"{'largest batch that trains':<26} {'mode':<10} {'fits':>5} {'OOM at':>6} {'cap':>5}  tries"]
        for search in results["searches"]:
            tries = " ".join(f"{batch}:{'ok' if outcome == 'fits' else outcome}" for batch, outcome in search["trials"])
            oom = search["smallest_oom"]
            lines.append(
                f"{search['model']:<26} {search['mode']:<10} {_number(search['largest_fit'], 'd'):>5} "
                f"{_number(oom, 'd') if oom is not None else 'none':>6} {search['cap']:>5}  {tries}"
                + (f"  ({search['stopped']})" if search["stopped"] else "")
            )
    return "\n".join(lines)
