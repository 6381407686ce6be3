#!/usr/bin/env python3
"""Our training beside a trusted toolkit's: Joey NMT 2.3.0 on the multi30k scale's own BPE'd en->de data, at the size
and settings of rnnmt's RNNsearch there (docs/multi30k/joeynmt.yaml says where the two cannot be the same).

    python3 scripts/multi30k_peer.py prepare --results results --out PEER/data     # the workflow's text, its codes applied
    python3 scripts/multi30k_peer.py train --data PEER/data --work PEER/joey --updates N
    python3 scripts/multi30k_peer.py test --data PEER/data --work PEER/joey --beam 12 --alpha 1.0
    python3 scripts/multi30k_peer.py compare --ours results/models/multi30k-rnnsearch-de --work PEER/joey --output PEER/compare.json

`train` runs Joey NMT from its virtual environment (shared/bench/peers/setup_venvs.sh joeynmt: /tmp/peers-venvs/joeynmt)
under the peers harness's step timer, one torch thread; run it on a core of its own (`taskset -c N`), as rnnmt's
training runs. `test` decodes test_2016_flickr and test_2017_flickr with Joey's beam search and scores them as the
multi30k table does (subword units joined, tokenized BLEU on the lowercased text). `compare` puts the two dev
perplexity curves side by side, by update and by training time, with both BLEUs.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rnnmt.evaluate.bleu import tokenized_bleu  # noqa: E402
from rnnmt.fileio import read_json, read_lines, write_lines  # noqa: E402
from rnnmt.metrics_file import read_metrics  # noqa: E402
from rnnmt.text.bpe import BpeSegmenter  # noqa: E402

CONFIG = ROOT / "docs" / "multi30k" / "joeynmt.yaml"
PEERS = ROOT.parent / "shared" / "bench" / "peers"
VENV = Path("/tmp/peers-venvs/joeynmt")
# The workflow's tokenized files of each split (results/data/tok/en-de/), as Joey's data names them.
SPLITS = {"train": "train", "val": "dev", "test_2016_flickr": "test", "test_2017_flickr": "test-test_2017_flickr"}
TESTS = ("test_2016_flickr", "test_2017_flickr")
LANGS = ("en", "de")
# The dev perplexities the comparison reads off both curves (docs/multi30k.md).
AT_UPDATES = (1000, 2000, 5000)


def prepare(results: Path, out: Path) -> None:
    """The workflow's tokenized en-de text of every split with its joint BPE codes applied, one file per split and language."""
    segmenter = BpeSegmenter(results / "data" / "vocab" / "en-de" / "bpe.joint.codes")
    out.mkdir(parents=True, exist_ok=True)
    for name, split in SPLITS.items():
        for lang in LANGS:
            source = results / "data" / ("selected" if split == "train" else "tok") / "en-de" / f"{split}.{lang}"
            write_lines(out / f"{name}.{lang}", (" ".join(segmenter.segment(line.split())) for line in read_lines(source)))
            write_lines(out / f"{name}.{lang}.tok", read_lines(source))
    print(f"BPE'd text of {', '.join(SPLITS)} -> {out}")


def _config(data: Path, work: Path, updates: int, seed: int, beam: int = 12, alpha: float = 0.0) -> Path:
    """docs/multi30k/joeynmt.yaml with its placeholders filled, written beside Joey's model folder."""
    values = {"DATA": data, "OUT": work / "model", "UPDATES": updates, "SEED": seed, "CKPT": work / "model" / "best.ckpt", "BEAM": beam, "ALPHA": alpha}
    text = CONFIG.read_text(encoding="utf-8")
    for key, value in values.items():
        text = text.replace("{{" + key + "}}", str(value))
    if left := re.findall(r"\{\{\w+\}\}", text):
        sys.exit(f"multi30k_peer: {CONFIG} has placeholders this script does not fill: {', '.join(left)}.")
    path = work / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def train(data: Path, work: Path, updates: int, seed: int, venv: Path, peers: Path) -> None:
    """Joey NMT's training under the step timer (each update's wall and CPU time into steps.json), one thread."""
    work.mkdir(parents=True, exist_ok=True)
    config = _config(data, work, updates, seed)
    env = {**os.environ, "PEERS_STEP_LOG": str(work / "steps.json"), "PEERS_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    argv = [str(venv / "bin" / "python"), str(peers / "steptimer.py"), "-m", "joeynmt", "train", str(config), "--skip-test"]
    with open(work / "train.log", "w", encoding="utf-8") as log:
        subprocess.run(argv, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    print(f"Joey NMT trained {updates} updates -> {work / 'model'}")


def joined(lines: list[str]) -> list[str]:
    """Subword units joined into words, as rnnmt's translations are written."""
    return [" ".join(BpeSegmenter.merge(line.split())) for line in lines]


def test(data: Path, work: Path, beam: int, alpha: float, venv: Path) -> None:
    """Joey's beam search on both Flickr test sets from its best checkpoint, scored as the multi30k table scores."""
    scores = {}
    for name in TESTS:
        config = _config(data, work, 1, 1, beam, alpha)
        text = config.read_text(encoding="utf-8").replace(f'test: "{data}/test_2016_flickr"', f'test: "{data}/{name}"')
        config.write_text(text, encoding="utf-8")
        hyps = work / f"hyps.{name}"
        argv = [str(venv / "bin" / "python"), "-m", "joeynmt", "test", str(config), "--output-path", str(hyps)]
        subprocess.run(argv, env={**os.environ, "OMP_NUM_THREADS": "1"}, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        words = joined(read_lines(work / f"hyps.{name}.test"))
        write_lines(work / f"hyps.{name}.words", words)
        scores[name] = tokenized_bleu(words, read_lines(data / f"{name}.de.tok"))
    result = {"beam": beam, "alpha": alpha, "bleu": scores}
    (work / "test.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


def joey_clock(work: Path) -> dict[int, float]:
    """Seconds from the start of Joey's training to each update: the step timer's, or, where the run ended before the
    timer wrote them (it writes at exit), the time stamps of Joey's own log lines (one every 100 updates)."""
    if (work / "steps.json").is_file():
        steps = json.loads((work / "steps.json").read_text())
        return {update: t - steps["t0"] for update, t in enumerate(steps["steps"], start=1)}
    stamps, start = {}, None
    for line in (work / "model" / "train.log").read_text(encoding="utf-8").splitlines():
        when = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp() if line[:4].isdigit() else None
        if start is None and line.endswith("EPOCH 1"):
            start = when
        elif start is not None and (step := re.search(r"Step:\s+(\d+),", line)):
            stamps[int(step.group(1))] = when - start
    return stamps


def joey_curve(work: Path) -> list[dict]:
    """Joey's validations: update, dev perplexity and the training time up to it (validations' own time included)."""
    clock = joey_clock(work)
    rows = []
    for line in (work / "model" / "validations.txt").read_text().splitlines():
        fields = dict(part.split(": ", 1) for part in line.split("\t") if ": " in part)
        update = int(fields["Steps"])
        rows.append({"update": update, "dev_ppl": float(fields["ppl"]), "seconds": clock[update]})
    return rows


def our_curve(model_dir: Path) -> list[dict]:
    """rnnmt's validations: update, dev perplexity and the training loop's wall time up to it (metrics.jsonl)."""
    return [{"update": r["update"], "dev_ppl": r["dev_ppl"], "seconds": r["wall_time_s"]} for r in read_metrics(model_dir / "metrics.jsonl") if "dev_ppl" in r]


def at_time(curve: list[dict], seconds: float) -> float | None:
    """The best dev perplexity a run had reached by `seconds` of training (None before its first validation)."""
    reached = [row["dev_ppl"] for row in curve if row["seconds"] <= seconds]
    return min(reached) if reached else None


def compare(ours: Path, work: Path, output: Path) -> None:
    """Dev perplexity at AT_UPDATES, the best and its update, the perplexity each had at the other's times, and test BLEU."""
    curves = {"rnnmt": our_curve(ours), "joeynmt": joey_curve(work)}
    summary = {}
    for name, curve in curves.items():
        by_update = {row["update"]: row["dev_ppl"] for row in curve}
        best = min(curve, key=lambda row: row["dev_ppl"])
        summary[name] = {
            **{f"dev_ppl_at_{u}": by_update.get(u) for u in AT_UPDATES},
            "best_dev_ppl": best["dev_ppl"],
            "best_update": best["update"],
            "seconds_to_best": best["seconds"],
            "seconds_per_1000_updates": curve[-1]["seconds"] / curve[-1]["update"] * 1000,
        }
    other = {"rnnmt": "joeynmt", "joeynmt": "rnnmt"}
    for name in curves:
        summary[name]["dev_ppl_at_the_other_best_time"] = at_time(curves[name], summary[other[name]]["seconds_to_best"])
    meta = read_json(ours / "meta.json")
    summary["rnnmt"]["test_bleu"] = "see results/tables/multi30k.csv (the table scores rnnmt's translations)"
    summary["rnnmt"]["updates_trained"] = meta["updates"]
    if (work / "test.json").is_file():
        summary["joeynmt"]["test"] = json.loads((work / "test.json").read_text())
    output.write_text(json.dumps({"summary": summary, "curves": curves}, indent=1))
    print(json.dumps(summary, indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="BPE'd text of every split from a workflow run's results/")
    p.add_argument("--results", type=Path, default=Path("results"))
    p.add_argument("--out", type=Path, required=True)
    for name in ("train", "test"):
        p = sub.add_parser(name, help=f"{name} Joey NMT")
        p.add_argument("--data", type=Path, required=True)
        p.add_argument("--work", type=Path, required=True)
        p.add_argument("--venv", type=Path, default=VENV, help=f"Joey NMT's virtual environment (default {VENV})")
        if name == "train":
            p.add_argument("--updates", type=int, required=True, help="the updates rnnmt's run trained (meta.json)")
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--peers", type=Path, default=PEERS, help=f"the peers harness, for its step timer (default {PEERS})")
        else:
            p.add_argument("--beam", type=int, default=12)
            p.add_argument("--alpha", type=float, default=0.0, help="Joey's length penalty (1.0: scores divided by length, as rnnmt's normalize)")
    p = sub.add_parser("compare", help="the two runs side by side")
    p.add_argument("--ours", type=Path, required=True, help="rnnmt's model folder (meta.json, metrics.jsonl)")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--output", type=Path, required=True)
    a = parser.parse_args()
    if a.command == "prepare":
        prepare(a.results, a.out)
    elif a.command == "train":
        train(a.data.resolve(), a.work.resolve(), a.updates, a.seed, a.venv, a.peers)
    elif a.command == "test":
        test(a.data.resolve(), a.work.resolve(), a.beam, a.alpha, a.venv)
    else:
        compare(a.ours, a.work, a.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
