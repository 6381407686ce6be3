"""Peak memory of the data stages that read the whole pool or training corpus (docs/paper-scale.md, "Memory").

    python3 tests/data_memory.py --pairs 1000000 4000000 --work /tmp/mem > rows.jsonl

For each size it builds a tokenized pool of that many pairs by repeating a sample (the real Europarl lines
in ../shared/data/wmt14 when present, else generated ones), runs each stage's `rnnmt` command under
`/usr/bin/time -v` and prints one JSON row per stage and size: peak RSS in MB (the kernel's high-water mark
of the process, as Slurm's memory limit sees it), seconds, pairs and target tokens. select-rank reads
stand-in scores of the right shape (its memory does not depend on their values).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np

SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "wmt14" / "train-sample" / "europarl-v7.fr-en.tok20k"
SHARDS = 8


def sample_lines() -> tuple[list[str], list[str], str]:
    """Parallel tokenized lines to repeat, and where they came from."""
    src, tgt = SAMPLE / "europarl-v7.fr-en.en", SAMPLE / "europarl-v7.fr-en.fr"
    if src.exists() and tgt.exists():
        return src.read_text(encoding="utf-8").splitlines(), tgt.read_text(encoding="utf-8").splitlines(), str(SAMPLE)
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(50_000)]
    lines = [" ".join(words[int(k)] for k in rng.zipf(1.3, size=int(n)) % len(words)) for n in rng.integers(5, 50, 20_000)]
    return lines, lines[::-1], "generated (Zipf, 5-50 tokens)"


def write_pool(work: Path, pairs: int, src: list[str], tgt: list[str]) -> tuple[Path, Path]:
    """The first `pairs` pairs of the sample repeated, one file per side."""
    paths = work / "pool.en", work / "pool.fr"
    for path, lines in zip(paths, (src, tgt)):
        block = "\n".join(lines) + "\n"
        with open(path, "w", encoding="utf-8") as f:
            for _ in range(pairs // len(lines)):
                f.write(block)
            f.write("".join(line + "\n" for line in lines[: pairs % len(lines)]))
    return paths


def stand_in_scores(work: Path, pairs: int) -> list[str]:
    """select-rank's inputs for a pool of `pairs`: per-shard score files and the pool's assembly report."""
    rng = np.random.default_rng(0)
    bounds = [k * pairs // SHARDS for k in range(SHARDS + 1)]
    files = []
    for k in range(SHARDS):
        n = bounds[k + 1] - bounds[k]
        parts = {key: rng.random(n, dtype=np.float32) for key in ("h_in_src", "h_out_src", "h_in_tgt", "h_out_tgt")}
        parts |= {"n_src": rng.integers(1, 60, n, dtype=np.int32), "n_tgt": rng.integers(1, 60, n, dtype=np.int32), "seconds": np.float64(1)}
        np.savez(files_k := work / f"scores{k}.npz", **parts)
        files.append(str(files_k))
    (work / "pool.json").write_text(json.dumps({"inputs": [{"pairs_out": pairs // 2}, {"pairs_out": pairs - pairs // 2}]}))
    return files


def measure(stage: str, command: list[str], log: Path) -> dict:
    """Run `command` under /usr/bin/time -v: its peak RSS (MB) and wall seconds."""
    with open(log, "w") as f:
        run = subprocess.run(["/usr/bin/time", "-v", *command], stdout=f, stderr=subprocess.STDOUT)
    text = log.read_text()
    if run.returncode != 0:
        sys.exit(f"{stage} failed (exit {run.returncode}); see {log}.")
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", text).group(1))
    minutes, seconds = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:\d+:)?(\d+):([\d.]+)", text).groups()
    return {"stage": stage, "peak_rss_mb": round(peak / 1024, 1), "seconds": round(60 * int(minutes) + float(seconds), 1)}


def stages(work: Path, src: Path, tgt: Path, scores: list[str]) -> dict[str, list[str]]:
    """Each measured stage's command, as the workflow runs it."""
    return {
        "vocab": ["rnnmt", "vocab", "--input", str(tgt), "--size", "30000", "--output", str(work / "vocab.fr.json")],
        "binarize": [
            "rnnmt",
            "binarize",
            "--src",
            str(src),
            "--tgt",
            str(tgt),
            "--src-vocab",
            str(work / "vocab.fr.json"),
            "--tgt-vocab",
            str(work / "vocab.fr.json"),
            "--output",
            str(work / "train.pt"),
        ],
        "select-index": ["rnnmt", "select-index", "--src", str(src), "--tgt", str(tgt), "--shards", str(SHARDS), "--output", str(work / "index.json")],
        "select-rank": [
            "rnnmt",
            "select-rank",
            "--scores",
            *scores,
            "--pool-report",
            str(work / "pool.json"),
            "--corpora",
            "a",
            "b",
            "--cut",
            "global",
            "--fraction",
            "0.3",
            "--output",
            str(work / "selected.npy"),
            "--report",
            str(work / "rank.json"),
        ],
        "select": [
            "rnnmt",
            "select",
            "--method",
            "axelrod",
            "--src",
            str(src),
            "--tgt",
            str(tgt),
            "--ids",
            str(work / "selected.npy"),
            "--out-src",
            str(work / "train.en"),
            "--out-tgt",
            str(work / "train.fr"),
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, nargs="+", required=True)
    parser.add_argument("--work", type=Path, required=True, help="scratch folder (needs ~100 bytes a pair)")
    args = parser.parse_args()
    src_lines, tgt_lines, origin = sample_lines()
    for pairs in args.pairs:
        work = args.work / str(pairs)
        work.mkdir(parents=True, exist_ok=True)
        src, tgt = write_pool(work, pairs, src_lines, tgt_lines)
        tokens = sum(len(line.split()) for line in tgt_lines) * pairs // len(tgt_lines)
        for stage, command in stages(work, src, tgt, stand_in_scores(work, pairs)).items():
            row = measure(stage, command, work / f"{stage}.log") | {"pairs": pairs, "tgt_tokens": tokens, "sample": origin}
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
