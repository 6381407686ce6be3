"""`rnnmt bench train|paper|precision|batches|corpus|translate|select`: throughput figures as JSON, for comparing commits (never
asserted); `corpus` writes a paper-size corpus for timing a real `rnnmt train`."""

from __future__ import annotations

import dataclasses
import gc
import os
import queue
import resource
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from rnnmt.decode.settings import DecodeSettings
from rnnmt.errors import UserError
from rnnmt.fileio import read_lines, write_json
from rnnmt.recurrence.kernels.stages import REGION as KERNEL_STAGE
from rnnmt.recurrence.kernels.stages import STAGES
from rnnmt.runtime import cpu_info, log, pick_device, synchronize

WARMUP = 2


def device_name(device: torch.device) -> str:
    """The card's or the CPU's name, for a figure's label."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return cpu_info()[0] or "an unknown CPU"


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def kernels_per_update(trainer: Any, update: int) -> dict[str, int]:
    """The GPU kernels one update runs (forward, backward, clipping, optimiser), counted on any device by
    torch.profiler: `kernels` for each outermost operator call, and `in_graph`, those inside the forward
    and backward that train.graph `cuda` captures as one graph. The batch is made before, outside the
    count; the output layer's softmax takes one block of rows, as on a GPU (nll.Workspace.blocked)."""
    from torch.profiler import ProfilerActivity, profile

    from rnnmt.train.graphs import CAPTURED_REGION

    batch = trainer.stream.batch(update)  # made on the host beforehand, as a data loader would: no launches
    workspace, static = trainer.setup.workspace, trainer.setup.static
    blocked = workspace is not None and workspace.blocked
    if workspace is not None:  # the plain recurrence's NLL keeps none
        workspace.blocked = False
    # A captured update replays its graph: the operators of the same update run eagerly are what the graph holds.
    capture = static.capture if static is not None else False
    if static is not None:
        static.capture = False
    try:
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            trainer.step(update, batch)
    finally:
        if workspace is not None:
            workspace.blocked = blocked
        if static is not None:
            static.capture = capture
    outermost = [e for e in prof.events() if _launches(e) and not any(_launches(a) for a in _ancestors(e))]
    in_graph = sum(kernels(e) for e in outermost if any(a.name == CAPTURED_REGION for a in _ancestors(e)))
    return {"kernels": sum(kernels(e) for e in outermost), "in_graph": in_graph, "width": [batch.src.shape[1], batch.tgt.shape[1]]}


def _launches(event: Any) -> bool:
    """An operator call, or a stage of recurrence/kernels/stages.py (one Triton kernel on a GPU, torch operations here)."""
    return event.name.startswith(("aten::", KERNEL_STAGE))


def kernels(event: Any) -> int:
    """The GPU kernels an operator call stands for: one for a matrix product, a reduction or a multi-tensor
    (`_foreach_`) op, a kernel stage's launches (one or two), whatever a CPU runs inside it; otherwise those of the calls inside
    it, or one for a call with none that launches work (views, allocations and dtype no-ops launch nothing)."""
    name = event.name.removeprefix("aten::")
    if name.startswith(KERNEL_STAGE):
        return STAGES[name.removeprefix(KERNEL_STAGE)].launches
    if name in ONE_KERNEL or name.startswith("_foreach_"):
        return 1
    inner = sum(kernels(c) for c in event.cpu_children if c.name.startswith("aten::"))
    return inner or int(name not in NO_KERNEL)


def _ancestors(event: Any) -> Iterator[Any]:
    while event.cpu_parent is not None:
        event = event.cpu_parent
        yield event


# One kernel each on a GPU; a CPU's implementation calls other operators inside (conjugation checks,
# fills of the accumulator, dtype checks).
ONE_KERNEL = frozenset(
    "addbmm addmm addmv amax amin baddbmm bmm dot gather index_select linalg_vector_norm logsumexp max mean min mm mv "
    "norm scatter_add_ sum _log_softmax _log_softmax_backward_data _softmax _softmax_backward_data".split()
)

# Operators that launch nothing when nothing inside them does: views, empty tensors, dtype no-ops.
NO_KERNEL = frozenset(
    "alias as_strided contiguous detach empty empty_like empty_strided expand lift_fresh narrow new_empty permute "
    "promote_types reshape _reshape_alias resize_ resolve_conj resolve_neg result_type select slice split squeeze t to "
    "transpose unbind unflatten unsqueeze view _unsafe_view".split()
)


def synthetic_data(lengths: dict[str, float], pairs: int, src_vocab: int, tgt_vocab: int, max_len: int | None, seed: int) -> Any:
    """Random pairs whose lengths are correlated log-normals (config `bench.lengths`), cut to 1..max_len."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab

    g = torch.Generator().manual_seed(seed)
    z_src = torch.randn(pairs, generator=g, dtype=torch.float64)
    r = lengths["correlation"]
    z_tgt = r * z_src + (1 - r**2) ** 0.5 * torch.randn(pairs, generator=g, dtype=torch.float64)
    first = len(Vocab.SPECIALS)
    sides = []
    for z, median, vocab in ((z_src, lengths["src_median"], src_vocab), (z_tgt, lengths["tgt_median"], tgt_vocab)):
        n = (median * torch.exp(lengths["sigma"] * z)).round().clamp(1, max_len or float("inf")).long()
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), n.cumsum(0)])
        sides += [torch.randint(first, vocab, (int(offsets[-1]),), generator=g), offsets]
    return ParallelData(*sides, {"synthetic": True, "src_vocab_size": src_vocab, "tgt_vocab_size": tgt_vocab})


def paper_system(config_path: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The validated config and system `name`'s training settings at the `paper` scale."""
    from rnnmt import config as rnnmt_config

    config = rnnmt_config.load(config_path, rnnmt_config.schema_beside(config_path))
    if name not in config["systems"]:
        raise UserError(f"--paper-shape {name}: {config_path} has no such system (known: {', '.join(config['systems'])}).")
    if "bench" not in config:
        raise UserError(f"--paper-shape needs the 'bench' section of config.yaml; {config_path} has none.")
    config["scale"] = "paper"
    return config, rnnmt_config.training_settings(config, name)


def _paper_shape(config_path: Path, name: str, pairs: int | None = None) -> dict[str, Any]:
    """System `name` at the `paper` scale, with random data of its vocabulary sizes (`pairs` pairs; default config's
    `bench.synthetic_pairs`, `bench.paper_pairs` of its pair when `pairs` is 0) and its update budget."""
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.batching import updates_for_epochs

    config, system = paper_system(config_path, name)
    vocab = config["scales"]["paper"]["vocab"]
    size = vocab.get("pair_sizes", {}).get(system["pair"], vocab["size"])
    train = system["train"]
    if pairs == 0:
        pairs = config["bench"]["paper_pairs"].get(system["pair"])
        if pairs is None:
            raise UserError(f"{config_path}: bench.paper_pairs has no '{system['pair']}', the pair of {name}; give --pairs.")
    data = synthetic_data(
        config["bench"]["lengths"],
        pairs or config["bench"]["synthetic_pairs"],
        size + len(Vocab.SPECIALS),
        size + len(Vocab.SPECIALS),
        train.get("max_len"),
        system["seed"],
    )
    words = [f"w{i}" for i in range(size)]
    budget = train.get("updates")
    if train.get("epochs") is not None:
        pairs = config["bench"]["paper_pairs"].get(system["pair"])
        if pairs is None:
            raise UserError(f"--paper-shape {name}: its budget is in epochs, but bench.paper_pairs in {config_path} has no '{system['pair']}'.")
        budget = updates_for_epochs(train["epochs"], pairs, train["batch_size"])
    return {"system": system, "data": data, "vocab": Vocab(words, [1] * size), "budget": budget, "lengths": config["bench"]["lengths"]}


def bench_train(
    device: torch.device,
    *,
    steps: int,
    paper_shape: str | None = None,
    config: Path | None = None,
    system_path: Path | None = None,
    data_path: Path | None = None,
    src_vocab: Path | None = None,
    tgt_vocab: Path | None = None,
    overrides: dict[str, str],
    settings_for: str | None = None,
    timed: bool = True,
) -> dict[str, Any]:
    """Time `steps` training updates after a warm-up: system `paper_shape` of `config` on random batches,
    or the system at `system_path` on its data; `overrides` replace values of its `train` section, and with
    `settings_for` ('cuda') the `auto` ones take the values that device would choose. Without `timed`, only the
    kernels of an update are counted (the rates are None)."""
    from rnnmt.train.loop import Trainer

    system, data, source_vocab, target_vocab, budget = _bench_inputs(paper_shape, config, system_path, data_path, src_vocab, tgt_vocab)
    system = {**system, "train": {**system["train"], **overrides}}
    if settings_for:
        system["train"].update(settings_as_on(system["train"], torch.device(settings_for), device))
    window = range(WARMUP, WARMUP + steps)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, data, {}, source_vocab, target_vocab, Path(tmp), device, {})
        for u in range(WARMUP):
            trainer.step(u)
        sizes = {u: trainer.stream.batch(u) for u in window}  # outside the timing
        tokens = sum(batch.target_tokens for batch in sizes.values())
        positions = sum(batch.tgt.numel() for batch in sizes.values())
        median = sorted(window, key=lambda u: sizes[u].tgt.numel())[len(window) // 2]
        if timed:
            first = _timed(trainer, window, device)  # every shape of the window is met (and, with graph cuda, captured) here
            shapes = trainer.setup.captured_shapes()
            steady = _timed(trainer, window, device)  # the same batches again: what the rest of a run sees
        counted = kernels_per_update(trainer, median)  # at the window's median batch: kernels grow with its widths
    result = {
        "system": system["name"],
        "data": "random, paper sizes" if paper_shape else str(data_path),
        "updates": steps,
        "batch_size": system["train"]["batch_size"],
        "target_tokens_per_update": tokens / steps,
        "batch_fill": tokens / positions,
        "kernels_per_update": counted["kernels"],
        "kernels_in_graph": counted["in_graph"],
        "kernels_counted_at_width": counted["width"],
        **{key: choice.value for key, choice in trainer.setup.choices.items()},
    }
    if budget is not None:
        result["paper_budget_updates"] = budget
    if not timed:
        return result
    one_off = max(0.0, first["seconds"] - steady["seconds"])
    result |= {
        "seconds": steady["seconds"],
        "updates_per_s": steps / steady["seconds"],
        "target_tokens_per_s": steady["tokens"] / steady["seconds"],
        "sentences_per_s": steady["sentences"] / steady["seconds"],
        # The window's first pass: the same updates with each new shape's one-off work (a capture on a GPU).
        "first_pass_seconds": first["seconds"],
        "first_pass_target_tokens_per_s": first["tokens"] / first["seconds"],
        "graphs_captured": shapes,
        "capture_seconds": one_off,
    }
    if budget is not None:
        hours = budget / result["updates_per_s"] / 3600
        if shapes:
            # Every padded shape a run can meet is captured once: the window's cost per shape, for all of them.
            result["shapes_possible"] = possible = _padded_shapes(trainer.cfg)
            hours += one_off / shapes * possible / 3600
        result["projected_hours"] = hours
    return result


def _bench_inputs(
    paper_shape: str | None, config: Path | None, system_path: Path | None, data_path: Path | None, src_vocab: Path | None, tgt_vocab: Path | None
) -> tuple[dict[str, Any], Any, Any, Any, int | None]:
    """The system, its data, its vocabularies and its paper budget (None but for a paper shape) that `bench_train` times."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.run import read_system

    if paper_shape:
        shape = _paper_shape(config, paper_shape)
        return shape["system"], shape["data"], shape["vocab"], shape["vocab"], shape["budget"]
    return read_system(system_path), ParallelData.load(data_path), Vocab.load(src_vocab), Vocab.load(tgt_vocab), None


def _resident_mb() -> dict[str, float]:
    """This process's resident memory now, in MiB (Linux, /proc/self/status): its own (`anonymous`) and the pages of
    files it maps (`file`: a memory-mapped corpus, shared with other readers and given back under pressure)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return {"anonymous": int(fields["RssAnon"].split()[0]) / 1024, "file": int(fields["RssFile"].split()[0]) / 1024}


def bench_batches(device: torch.device, *, paper_shape: str, config: Path, pairs: int | None, data_path: Path | None, steps: int) -> dict[str, Any]:
    """The host's time to make each of `steps` training batches of system `paper_shape` at its paper settings (sorted
    groups, length filter, padding to `pad_to` as a GPU's captured updates take them) from a corpus with the papers'
    lengths: the binarized file `data_path` (read as training reads it, memory-mapped; `bench corpus` writes one), else
    `pairs` random pairs made here (default: its paper training set, `bench.paper_pairs`); and the memory the corpus
    and the batching hold. Nothing runs on `device`: a data loader's work happens on the host."""
    from rnnmt.models.source import SourceFormat
    from rnnmt.text.binarize import ParallelData
    from rnnmt.train.batching import BatchStream
    from rnnmt.train.defaults import TRAIN_DEFAULTS

    start = _resident_mb()
    if data_path is not None:
        data, system = ParallelData.load(data_path), paper_system(config, paper_shape)[1]
    else:
        shape = _paper_shape(config, paper_shape, pairs or 0)
        data, system = shape["data"], shape["system"]
    with_corpus = _resident_mb()
    train = {**TRAIN_DEFAULTS, **system["train"]}
    stream = BatchStream(
        data,
        train["batch_size"],
        train["sort_k_batches"],
        train["max_len"],
        system["seed"],
        sort_by=train["sort_by"],
        shuffle_batches=train["shuffle_batches"],
        source=SourceFormat.of(system["model"]),
        pad_to=train["pad_to"],
    )
    seconds = []
    for update in range(steps):
        began = time.perf_counter()
        stream.batch(update)
        seconds.append(time.perf_counter() - began)
    end = _resident_mb()
    ms = sorted(1000 * s for s in seconds)
    corpus_bytes = sum(t.numel() * t.element_size() for t in (data.src_ids, data.src_offsets, data.tgt_ids, data.tgt_offsets))
    return {
        "system": system["name"],
        "pairs": len(data),
        "batches": steps,
        "batch_size": train["batch_size"],
        "sort_k_batches": train["sort_k_batches"],
        "batch_ms_median": ms[len(ms) // 2],
        "batch_ms_mean": sum(ms) / len(ms),
        "batch_ms_max": ms[-1],
        "corpus": str(data_path) if data_path else "random, made here",
        "corpus_mb": corpus_bytes / 2**20,
        # What loading (or making) the corpus, then the batching, added to the process's resident memory.
        "resident_corpus_mb": {kind: with_corpus[kind] - start[kind] for kind in start},
        "resident_batching_mb": {kind: end[kind] - with_corpus[kind] for kind in start},
    }


def write_paper_corpus(*, paper_shape: str, config: Path, out_dir: Path, pairs: int | None, dev_pairs: int, updates: int | None) -> dict[str, Any]:
    """A paper-size corpus of random ids with the papers' lengths for timing a real `rnnmt train` of system
    `paper_shape` at its paper settings (validation, checkpoints, logging): train.pt (`pairs`, default its paper
    training set), dev.pt, both vocabularies and system.json (its budget cut to `updates` when given)."""
    shape = _paper_shape(config, paper_shape, pairs or 0)
    system, vocab = shape["system"], shape["vocab"]
    if updates is not None:
        system = {**system, "train": {**system["train"], "updates": updates, "epochs": None}}
    size = len(vocab)
    dev = synthetic_data(shape["lengths"], dev_pairs, size, size, None, system["seed"] + 1)
    out_dir.mkdir(parents=True, exist_ok=True)
    shape["data"].save(out_dir / "train.pt")
    dev.save(out_dir / "dev.pt")
    vocab.save(out_dir / "vocab.src.json")
    vocab.save(out_dir / "vocab.tgt.json")
    write_json(out_dir / "system.json", system)
    log(f"wrote {out_dir}: {len(shape['data']):,} training pairs, {len(dev):,} dev pairs, vocabularies of {size:,}, system.json")
    return {
        "system": system["name"],
        "pairs": len(shape["data"]),
        "dev_pairs": len(dev),
        "vocab": size,
        "out_dir": str(out_dir),
        "updates": system["train"].get("updates"),
    }


def bench_precision(
    device: torch.device,
    *,
    paper_shape: str | None,
    config: Path,
    system_path: Path | None,
    data_path: Path,
    valid_path: Path,
    src_vocab: Path,
    tgt_vocab: Path,
    steps: int,
    valid_every: int,
    settle: int,
    out_dir: Path,
    overrides: dict[str, str],
) -> dict[str, Any]:
    """System `paper_shape` at its paper settings (or the system at `system_path`) trained on the given data in float32
    and in bfloat16 (bench/precision.py): the dev-NLL curves, their table and figure under `out_dir`."""
    from rnnmt.bench import precision
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.run import load_data, read_system

    system = paper_system(config, paper_shape)[1] if paper_shape else read_system(system_path)
    system = {**system, "train": {**system["train"], **overrides}}
    source, target = Vocab.load(src_vocab), Vocab.load(tgt_vocab)
    data: ParallelData = load_data(data_path, source, target)
    return precision.compare(
        device,
        system=system,
        data=data,
        dev=load_data(valid_path, source, target),
        src_vocab=source,
        tgt_vocab=target,
        updates=steps,
        valid_every=valid_every,
        settle=settle,
        out_dir=out_dir,
    )


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


def _shared_gpu_worker(device: str, config: Path, name: str, steps: int, seconds: float, overrides: dict[str, str], barrier: Any, results: Any) -> None:
    """One process of `bench_concurrent`: system `name` at paper shape warms up and captures its window's shapes,
    waits for the others, then trains for `seconds` with them; puts its target tokens and seconds."""
    from rnnmt.runtime import set_threads
    from rnnmt.train.loop import Trainer

    set_threads(1)
    run_on = torch.device(device)
    shape = _paper_shape(config, name)
    system = {**shape["system"], "train": {**shape["system"]["train"], **overrides}}
    window = range(WARMUP, WARMUP + steps)
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, shape["data"], {}, shape["vocab"], shape["vocab"], Path(tmp), run_on, {})
        for u in range(WARMUP):
            trainer.step(u)
        _timed(trainer, window, run_on)  # every shape of the window is met (and captured) before the clock starts
        barrier.wait()
        synchronize(run_on)
        start, tokens, updates = time.perf_counter(), 0, 0
        while time.perf_counter() - start < seconds:
            tokens += trainer.step(window[updates % steps]).tokens
            updates += 1
        synchronize(run_on)
        results.put(
            {
                "system": name,
                "updates": updates,
                "target_tokens": tokens,
                "seconds": time.perf_counter() - start,
                "settings": {key: c.value for key, c in trainer.setup.choices.items()},
            }
        )


def bench_concurrent(
    device: torch.device, *, config: Path, systems: list[str], processes: int, steps: int, seconds: float, overrides: dict[str, str]
) -> dict[str, Any]:
    """`processes` training processes on one device at once (process i trains systems[i mod len(systems)] at paper
    shape), each timed over the same `seconds` after all have warmed up: each one's target tokens/s and their sum.
    On a GPU without MPS their kernels take turns; with MPS (started outside) they run side by side."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")  # CUDA cannot be forked
    barrier, results = context.Barrier(processes), context.Queue()
    names = [systems[i % len(systems)] for i in range(processes)]
    workers = [
        context.Process(target=_shared_gpu_worker, args=(str(device), config, name, steps, seconds, overrides, barrier, results), daemon=True) for name in names
    ]
    for worker in workers:
        worker.start()
    rows = []
    while len(rows) < processes:
        try:
            rows.append(results.get(timeout=30))
        except queue.Empty:  # a worker that died never puts its row
            if dead := [w for w in workers if w.exitcode not in (None, 0)]:
                barrier.abort()
                raise UserError(
                    f"bench paper --concurrent {processes}: {len(dead)} of the training processes failed (exit {dead[0].exitcode}); see the messages above."
                ) from None
    for worker in workers:
        worker.join()
    for row in rows:
        row["target_tokens_per_s"] = row["target_tokens"] / row["seconds"]
    return {
        "processes": processes,
        "seconds": seconds,
        "systems": sorted(rows, key=lambda r: r["system"]),
        "aggregate_target_tokens_per_s": sum(r["target_tokens_per_s"] for r in rows),
        "mps": _mps_active(),
    }


def _mps_active() -> bool:
    """Whether an NVIDIA MPS control daemon serves this process's pipe directory (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps)."""
    return Path(os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps"), "control").exists()


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


def settings_as_on(train: dict[str, Any], chooser: torch.device, device: torch.device) -> dict[str, str]:
    """The `auto` training settings as `chooser` would resolve them, to run on `device`: a CPU runs a capture's
    update uncaptured (graph static), so that it counts the kernels a GPU would launch."""
    from rnnmt.train.defaults import TRAIN_DEFAULTS
    from rnnmt.train.device_choices import choose

    chosen = {key: c.value for key, c in choose({**TRAIN_DEFAULTS, **train}, chooser).items()}
    if chosen["graph"] == "cuda" and device.type != "cuda":
        chosen["graph"] = "static"
    return chosen


def _timed(trainer: Any, updates: range, device: torch.device) -> dict[str, float]:
    """Run `updates` (their batches made inside the timing, as in training) between two device syncs."""
    synchronize(device)
    start, tokens, sentences = time.perf_counter(), 0, 0
    for u in updates:
        step = trainer.step(u)
        sentences, tokens = sentences + step.sentences, tokens + step.tokens
    synchronize(device)
    return {"seconds": time.perf_counter() - start, "tokens": tokens, "sentences": sentences}


def _padded_shapes(cfg: dict[str, Any]) -> int:
    """Source × target widths a run at static shapes can meet: multiples of pad_to up to max_len + EOS."""
    from rnnmt.models.source import round_up

    widths = round_up(cfg["max_len"] + 1, cfg["pad_to"]) // cfg["pad_to"]
    return widths * widths


def bench_translate(device: torch.device, *, model: Path, source: Path, steps: int, batch_size: int, settings: DecodeSettings) -> dict[str, Any]:
    """Time beam search over the first steps·batch_size sentences of `source`."""
    from rnnmt.decode.translate import translate_lines
    from rnnmt.models.artifact import load_model
    from rnnmt.train.selfcheck import checked_loops

    tm = load_model(model, device, checked_loops)
    lines = read_lines(source)[: steps * batch_size]
    translate_lines(tm, lines[:batch_size], settings, batch_size=batch_size, device=device)  # warm-up
    synchronize(device)
    start = time.perf_counter()
    out = translate_lines(tm, lines, settings, batch_size=batch_size, device=device)
    synchronize(device)
    seconds = time.perf_counter() - start
    return {
        "system": tm.system["name"],
        "sentences": len(lines),
        "beam": dataclasses.asdict(settings),
        "batch_size": batch_size,
        "seconds": seconds,
        "sentences_per_s": len(lines) / seconds,
        "target_tokens_per_s": sum(len(o.split()) + 1 for o in out) / seconds,
    }


def bench_select(device: torch.device, *, src: Path, tgt: Path, indomain_src: Path, indomain_tgt: Path, order: int, chunk_lines: int) -> dict[str, Any]:
    """Time Axelrod scoring end to end (read, encode, four LMs, CED) over a tokenized pool, one core."""
    import numpy as np

    from rnnmt.select import axelrod as ax
    from rnnmt.select.ngram import Encoder, build_vocab

    start = time.perf_counter()
    indomain = {"src": read_lines(indomain_src), "tgt": read_lines(indomain_tgt)}
    index = ax.shard_index(src, tgt, 1)
    tgt_lengths = ax.token_counts(tgt)
    sample = ax.ood_sample(tgt_lengths, int(sum(len(line.split()) for line in indomain["tgt"])), seed=1)
    keep = np.zeros(len(tgt_lengths), dtype=bool)
    keep[sample] = True
    words, lms = {}, {}
    for side, path in (("src", src), ("tgt", tgt)):
        words[side] = build_vocab(indomain[side])
        lms[f"in_{side}"] = ax.estimate_lm(indomain[side], words[side], order, str(path))
        ood = [line for line, k in zip(read_lines(path), keep) if k]
        lms[f"out_{side}"] = ax.estimate_lm(ood, words[side], order, "pool sample")
    prepare = time.perf_counter() - start
    parts = ax.score_shard(src, tgt, index, 0, lms, {side: Encoder(w) for side, w in words.items()}, chunk_lines)
    seconds = float(parts["seconds"])
    pairs = len(parts["n_src"])
    return {
        "pairs": pairs,
        "mean_tokens": {side: float(parts[f"n_{side}"].mean()) for side in ("src", "tgt")},
        "order": order,
        "chunk_lines": chunk_lines,
        "lm_ngrams": {key: int(sum(len(k) for k in lm.keys)) for key, lm in lms.items()},
        "prepare_seconds": prepare,
        "seconds": seconds,
        "pairs_per_s": pairs / seconds,
        "tokens_per_s": int(parts["n_src"].sum() + parts["n_tgt"].sum()) / seconds,
    }


def benchmark(what: str, measure: Callable[[torch.device], dict[str, Any]], *, device: str, gpu_lock_dir: Path | None, output: Path | None) -> dict[str, Any]:
    """`rnnmt bench WHAT`: `measure` on the picked device, with what was measured and where; written to `output` too."""
    run_on = pick_device(device, gpu_lock_dir)
    result = measure(run_on)
    result.update(
        {"what": what, "device": str(run_on), "device_name": device_name(run_on), "threads": torch.get_num_threads(), "peak_memory_mb": _peak_memory_mb(run_on)}
    )
    result["torch"] = torch.__version__
    if output:
        write_json(output, result)
    return result
