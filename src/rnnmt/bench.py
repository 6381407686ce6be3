"""`rnnmt bench train|translate|select`: throughput figures as JSON, for comparing commits (never asserted)."""

from __future__ import annotations

import dataclasses
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
from rnnmt.runtime import pick_device

WARMUP = 2


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _ops_per_update(trainer: Any, update: int) -> dict[str, int]:
    """Operator calls of one update under torch.profiler: every innermost aten op, and those that run a kernel
    (views, reshapes and allocations excluded); on a GPU each of the latter is about one kernel launch. The
    batch is made before, outside the count. A multi-tensor (`_foreach_`) op counts once: a GPU runs it as
    one kernel where a CPU loops over its tensors. With train.graph static, `capturable_kernel_ops` are those
    of the forward and backward that `cuda` replays as one graph (a CPU can count what a capture would
    save, not capture)."""
    from torch.profiler import ProfilerActivity, profile

    from rnnmt.train.graphs import CAPTURED_REGION

    batch = trainer.stream.batch(update)  # made on the host beforehand, as a data loader would: no launches
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        trainer.step(update, batch)
    calls = [e for e in prof.events() if _is_call(e)]
    kernels = [e for e in calls if e.name.removeprefix("aten::") not in NO_KERNEL]
    captured = sum(any(a.name == CAPTURED_REGION for a in _ancestors(e)) for e in kernels)
    return {"aten_ops": len(calls), "kernel_ops": len(kernels), "capturable_kernel_ops": captured}


def _ancestors(event: Any) -> Iterator[Any]:
    while event.cpu_parent is not None:
        event = event.cpu_parent
        yield event


def _is_call(event: Any) -> bool:
    """An innermost aten op, or a multi-tensor op as a whole (not the per-tensor ops a CPU runs inside it)."""
    if not event.name.startswith("aten::") or any(a.name.startswith("aten::_foreach_") for a in _ancestors(event)):
        return False
    return event.name.startswith("aten::_foreach_") or not any(c.name.startswith("aten::") for c in event.cpu_children)


# Innermost aten ops that only make a view or an empty tensor: no kernel runs.
NO_KERNEL = frozenset(
    "alias as_strided detach empty empty_like empty_strided expand lift_fresh narrow new_empty permute reshape "
    "_reshape_alias resize_ select slice split squeeze t transpose unbind unflatten unsqueeze view _unsafe_view".split()
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


def _paper_shape(config_path: Path, name: str) -> dict[str, Any]:
    """System `name` at the `paper` scale, with random data of its vocabulary sizes and its update budget."""
    from rnnmt import config as rnnmt_config
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.batching import updates_for_epochs

    config = rnnmt_config.load(config_path, rnnmt_config.schema_beside(config_path))
    if name not in config["systems"]:
        raise UserError(f"--paper-shape {name}: {config_path} has no such system (known: {', '.join(config['systems'])}).")
    if "bench" not in config:
        raise UserError(f"--paper-shape needs the 'bench' section of config.yaml; {config_path} has none.")
    config["scale"] = "paper"
    system = rnnmt_config.training_settings(config, name)
    vocab = config["scales"]["paper"]["vocab"]
    size = vocab.get("pair_sizes", {}).get(system["pair"], vocab["size"])
    train = system["train"]
    data = synthetic_data(config["bench"]["lengths"], config["bench"]["synthetic_pairs"], size + len(Vocab.SPECIALS), size + len(Vocab.SPECIALS), train.get("max_len"), system["seed"])
    words = [f"w{i}" for i in range(size)]
    budget = train.get("updates")
    if train.get("epochs") is not None:
        pairs = config["bench"]["paper_pairs"].get(system["pair"])
        if pairs is None:
            raise UserError(f"--paper-shape {name}: its budget is in epochs, but bench.paper_pairs in {config_path} has no '{system['pair']}'.")
        budget = updates_for_epochs(train["epochs"], pairs, train["batch_size"])
    return {"system": system, "data": data, "vocab": Vocab(words, [1] * size), "budget": budget}


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
) -> dict[str, Any]:
    """Time `steps` training updates after a warm-up: system `paper_shape` of `config` on random batches,
    or the system at `system_path` on its data; `overrides` replace values of its `train` section."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.loop import Trainer
    from rnnmt.train.run import read_system

    if paper_shape:
        shape = _paper_shape(config, paper_shape)
        system, data, source_vocab, target_vocab, budget = shape["system"], shape["data"], shape["vocab"], shape["vocab"], shape["budget"]
    else:
        system, data, budget = read_system(system_path), ParallelData.load(data_path), None
        source_vocab, target_vocab = Vocab.load(src_vocab), Vocab.load(tgt_vocab)
    system = {**system, "train": {**system["train"], **overrides}}
    with tempfile.TemporaryDirectory() as tmp:
        trainer = Trainer(system, data, {}, source_vocab, target_vocab, Path(tmp), device, {})
        for u in range(WARMUP):
            trainer.step(u)
        _sync(device)
        start, tokens, sents = time.perf_counter(), 0, 0
        for u in range(WARMUP, WARMUP + steps):
            _, n, t = trainer.step(u)
            sents, tokens = sents + n, tokens + t
        _sync(device)
        seconds = time.perf_counter() - start
        positions = sum(trainer.stream.batch(u).tgt.numel() for u in range(WARMUP, WARMUP + steps))  # outside the timing
        ops = _ops_per_update(trainer, WARMUP + steps)
    result = {
        "system": system["name"],
        "data": "random, paper sizes" if paper_shape else str(data_path),
        "updates": steps,
        "batch_size": system["train"]["batch_size"],
        "seconds": seconds,
        "updates_per_s": steps / seconds,
        "target_tokens_per_s": tokens / seconds,
        "sentences_per_s": sents / seconds,
        "target_tokens_per_update": tokens / steps,
        "batch_fill": tokens / positions,
        "operator_calls_per_update": ops,
        "recurrence": trainer.cfg["recurrence"],
        "precision": trainer.cfg["precision"],
        "sync": trainer.cfg["sync"],
        "graph": trainer.cfg["graph"],
        # With graph cuda, each padded shape's first update captures its graph, inside the timing if it is new then.
        "graphs_captured": len(trainer.static.graphs) if trainer.static is not None else 0,
    }
    if budget is not None:
        result.update({"paper_budget_updates": budget, "projected_hours": budget / (steps / seconds) / 3600})
    return result


def bench_translate(device: torch.device, *, model: Path, source: Path, steps: int, batch_size: int, settings: DecodeSettings) -> dict[str, Any]:
    """Time beam search over the first steps·batch_size sentences of `source`."""
    from rnnmt.decode.translate import translate_lines
    from rnnmt.models.artifact import load_model

    tm = load_model(model, device)
    lines = read_lines(source)[: steps * batch_size]
    translate_lines(tm, lines[:batch_size], settings, batch_size=batch_size, device=device)  # warm-up
    _sync(device)
    start = time.perf_counter()
    out = translate_lines(tm, lines, settings, batch_size=batch_size, device=device)
    _sync(device)
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


def bench_select(
    device: torch.device, *, src: Path, tgt: Path, indomain_src: Path, indomain_tgt: Path, order: int, chunk_lines: int
) -> dict[str, Any]:
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


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def benchmark(
    what: str, measure: Callable[[torch.device], dict[str, Any]], *, device: str, gpu_lock_dir: Path | None, output: Path | None
) -> dict[str, Any]:
    """`rnnmt bench WHAT`: `measure` on the picked device, with what was measured and where; written to `output` too."""
    run_on = pick_device(device, gpu_lock_dir)
    result = measure(run_on)
    result.update({"what": what, "device": str(run_on), "threads": torch.get_num_threads(), "peak_memory_mb": _peak_memory_mb(run_on)})
    result["torch"] = torch.__version__
    if output:
        write_json(output, result)
    return result
