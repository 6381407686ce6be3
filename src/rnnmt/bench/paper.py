"""`rnnmt bench paper`: every system of a scale at its paper shape (`bench train`), a row each, the GPU-hours they
take and the GPUs that finish them in a day; and the result as a Markdown table."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import torch

from rnnmt.bench.measure import device_name
from rnnmt.bench.training import bench_train
from rnnmt.errors import UserError
from rnnmt.fileio import write_json
from rnnmt.runtime import log


def bench_paper(
    device: torch.device, *, config: Path, scale: str, steps: int, overrides: dict[str, str], systems: list[str] | None = None, keep: Path | None = None
) -> dict[str, Any]:
    """Every system of `scale` in `config` at its paper shape (`bench_train`), one row each, and what they cost in all.

    On a CUDA device each row has the steady rate, the captures and the projected hours of its paper budget,
    and the totals say how many GPU-hours the jobs take and how many GPUs finish them in a day. On any other
    device the auto settings resolve as on a GPU and only the kernels an update launches are counted. Each
    row is logged when measured and, with `keep`, the rows so far are written there (`complete` false), so
    that a run stopped before the end keeps what it measured.
    """
    from rnnmt import config as rnnmt_config

    known = rnnmt_config.load(config, rnnmt_config.schema_beside(config))["scales"]
    if scale not in known:
        raise UserError(f"--scale {scale}: {config} has no such scale (known: {', '.join(known)}).")
    names = systems or known[scale]["systems"]
    timed = device.type == "cuda"
    result: dict[str, Any] = {"scale": scale, "steps": steps, "timed": timed, "complete": False, "device_name": device_name(device), "systems": []}
    for i, name in enumerate(names, 1):
        row = bench_train(device, steps=steps, paper_shape=name, config=config, overrides=overrides, settings_for=None if timed else "cuda", timed=timed)
        result["systems"].append(kept := {key: row.get(key) for key in PAPER_COLUMNS})
        log(f"bench paper {i}/{len(names)} on {device}: " + ", ".join(f"{key} {value}" for key, value in kept.items()))
        if keep is not None:
            write_json(keep, result)
        gc.collect()  # the finished system's model, graphs and buffers go back before the next one is built
        if device.type == "cuda":
            torch.cuda.empty_cache()
    result["complete"] = True
    if timed:
        hours = [row["projected_hours"] for row in result["systems"]]
        result["gpu_hours"] = sum(hours)
        result["gpus_for_one_day"], result["hours_on_those_gpus"] = gpus_for(hours, DAY_HOURS)
    return result


# What `bench paper` keeps of each system's `bench_train`.
PAPER_COLUMNS = (
    "system",
    "paper_budget_updates",
    "target_tokens_per_update",
    "target_tokens_per_s",
    "kernels_per_update",
    "graphs_captured",
    "capture_seconds",
    "shapes_possible",
    "projected_hours",
    "precision",
    "graph",
    "recurrence",
)
DAY_HOURS = 24.0


def gpus_for(hours: list[float], limit: float) -> tuple[int | None, float]:
    """The fewest GPUs that finish jobs of `hours` within `limit`, each job on one GPU, the longest first onto the
    least loaded (LPT); and the hours they take. None (and the longest job) where one job alone takes longer."""
    longest = max(hours, default=0.0)
    if longest > limit:
        return None, longest
    for gpus in range(1, len(hours) + 1):
        loads = [0.0] * gpus
        for job in sorted(hours, reverse=True):
            loads[loads.index(min(loads))] += job
        if max(loads) <= limit:
            return gpus, max(loads)
    return len(hours), longest


def paper_table(result: dict[str, Any]) -> str:
    """`bench_paper`'s result as a Markdown table, with the totals under it."""

    def number(value: Any, digits: int = 0) -> str:
        return "—" if value is None else f"{value:,.{digits}f}"

    lines = [
        f"`rnnmt bench paper` on {result['device_name']}, {result['steps']} updates a system"
        + ("" if result["timed"] else " (kernels counted as a GPU runs the update; no rates on this device)")
        + ":",
        "",
        "| system | updates | target tokens / update | target tokens/s | kernels / update | capture s (window) | GPU-hours | settings |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in result["systems"]:
        lines.append(
            f"| {row['system']} | {number(row['paper_budget_updates'])} | {number(row['target_tokens_per_update'])} | "
            f"{number(row['target_tokens_per_s'])} | {number(row['kernels_per_update'])} | {number(row['capture_seconds'], 1)} | "
            f"{number(row['projected_hours'], 1)} | {row['precision']}, graph {row['graph']}, {row['recurrence']} |"
        )
    if result["timed"]:
        gpus = result["gpus_for_one_day"]
        day = (
            f"{gpus} GPUs finish them in {result['hours_on_those_gpus']:.1f} h"
            if gpus
            else f"the longest job alone takes {result['hours_on_those_gpus']:.1f} h"
        )
        lines += ["", f"In all: {result['gpu_hours']:.1f} GPU-hours for {len(result['systems'])} jobs; {day} (longest job first onto the least loaded GPU)."]
    return "\n".join(lines) + "\n"
