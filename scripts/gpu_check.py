#!/usr/bin/env python3
"""The GPU checks and measurements in one run: the `cuda` suite, the cost of determinism, bfloat16 against float32
on real data, a real training run's rate beside `bench paper`'s, jobs sharing one GPU (with and without MPS), and the
multi30k scale's RNNsearch en->de trained to the end on the GPU's default path and in float32, with its BLEU and time.

A GPU is at hand only now and then; whenever one is, run this first. Two steps:

    python3 scripts/gpu_check.py prepare            # here, beside ../shared: wheels and data into .gpu/ (.gitignore has it)
    python3 scripts/gpu_check.py run --out DIR      # on the GPU machine, from the project root, with .gpu/ carried

`run` writes DIR/gpu-check.log (everything printed) and DIR/gpu-check.json (each part's results) and needs neither
Snakemake nor a registry there: rnnmt runs from src/ (`PYTHONPATH=src`), the wheels from .gpu/wheels. `--parts`
picks parts (default all: about 20 minutes, derived from the parts' times: on an H200 the multi30k part took 484 s
and the suite more than 225 s, the others about 10 minutes on an H100; a short lease takes one or two parts a call);
`--dry-run` prints every command and checks that each parses and that its inputs exist, without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "wmt14"
# What the GPU machine lacks (it has torch, Triton, numpy, pandas, matplotlib, PyYAML and pytest), at the lock's
# versions (constraints.txt), as wheels for its Python 3.12; pytest-xdist runs the suite in parallel there.
WHEELS = (
    "jsonschema referencing jsonschema-specifications rpds-py attrs sacremoses subword-nmt mock click joblib tqdm regex sacrebleu portalocker tabulate "
    "colorama lxml pytest-xdist execnet"
).split()
# Real data for the precision comparison: (pair, training sample, dev set) from ../shared/data/wmt14.
DATA = {
    "en-fr": {
        "train": ("train-sample/europarl-v7.fr-en.tok20k/europarl-v7.fr-en.en", "train-sample/europarl-v7.fr-en.tok20k/europarl-v7.fr-en.fr"),
        "dev": ("dev/newstest2012.en", "dev/newstest2012.fr"),
        "tokenized": False,
    },
    "en-de": {
        "train": ("ende-tokenized-sample/src-train.txt", "ende-tokenized-sample/targ-train.txt"),
        "dev": ("ende-tokenized-sample/src-val.txt", "ende-tokenized-sample/targ-val.txt"),
        "tokenized": True,
    },
}
SYSTEMS = {"rnnsearch-50": "en-fr", "luong-localp-general-feed": "en-de"}
# The multi30k scale's RNNsearch en->de, trained to its early stop on the GPU: its data as the workflow makes them.
MULTI30K = ROOT.parent / "shared" / "data" / "multi30k"
MULTI30K_SYSTEM = "multi30k-rnnsearch-de"
MULTI30K_PRECISIONS = ("auto", "float32")  # the GPU's default path (kernels, bfloat16, captured updates), and float32
SHARED_GPU = ["rnnsearch-50", "luong-global-general-feed", "luong-localp-general-feed"]


@dataclass
class Step:
    """One command of a part: what it is, its argv, its time limit, and where it leaves JSON (if it does)."""

    label: str
    argv: list[str]
    limit_s: int
    output: Path | None = None
    needs: list[Path] = field(default_factory=list)


def rnnmt(*args: str) -> list[str]:
    return [sys.executable, "-m", "rnnmt.cli", *args]


def parts(gpu_dir: Path, work: Path) -> dict[str, list[Step]]:
    """Every part's steps, in the order they run."""
    data = gpu_dir / "data"
    cuda_tests = sorted(
        str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py") if re.search(r"mark\.cuda|pytestmark = pytest\.mark\.cuda", p.read_text())
    )
    # -v: each test's verdict reaches the log as it ends, so a run cut off at its limit still says what passed and failed.
    suite = [
        sys.executable,
        "-m",
        "pytest",
        *"-v --tb=short -p no:cacheprovider -m cuda -n 16".split(),
        "--junitxml",
        str(work / "cuda-suite.xml"),
        *cuda_tests,
    ]
    steps: dict[str, list[Step]] = {"suite": [Step("pytest -m cuda", suite, 480)]}
    steps["determinism"] = [
        Step(
            f"{system} deterministic {mode}",
            rnnmt(
                "bench",
                "train",
                "--paper-shape",
                system,
                "--device",
                "cuda",
                "--steps",
                "60",
                "--deterministic",
                mode,
                "--output",
                str(work / f"det-{system}-{mode}.json"),
            ),
            120,
            work / f"det-{system}-{mode}.json",
        )
        for system in ("rnnsearch-50", "luong-localp-general-feed")
        for mode in ("on", "off")
    ]
    steps["precision"] = []
    for system, pair in SYSTEMS.items():
        files = {name: data / pair / name for name in ("train.pt", "dev.pt", "vocab.src.json", "vocab.tgt.json")}
        argv = rnnmt(
            "bench",
            "precision",
            "--paper-shape",
            system,
            "--data",
            str(files["train.pt"]),
            "--valid",
            str(files["dev.pt"]),
            "--src-vocab",
            str(files["vocab.src.json"]),
            "--tgt-vocab",
            str(files["vocab.tgt.json"]),
            "--device",
            "cuda",
            "--steps",
            "600",
            "--valid-every",
            "100",
            "--settle",
            "300",
            "--out-dir",
            str(work / f"precision-{system}"),
            "--output",
            str(work / f"precision-{system}.json"),
        )
        steps["precision"].append(Step(f"{system} float32 and bfloat16", argv, 240, work / f"precision-{system}.json", list(files.values())))
    corpus, run = work / "corpus", work / "realrun"
    vocabs = ["--src-vocab", str(corpus / "vocab.src.json"), "--tgt-vocab", str(corpus / "vocab.tgt.json")]
    steps["realrun"] = [
        Step("a paper-size corpus, 12M pairs", rnnmt("bench", "corpus", "--paper-shape", "rnnsearch-50", "--updates", "5500", "--out-dir", str(corpus)), 240),
        Step(
            "host: one paper batch from it",
            rnnmt(
                "bench",
                "batches",
                "--paper-shape",
                "rnnsearch-50",
                "--data",
                str(corpus / "train.pt"),
                "--steps",
                "2000",
                "--device",
                "cpu",
                "--output",
                str(work / "batches.json"),
            ),
            120,
            work / "batches.json",
        ),
        Step(
            "rnnmt train on it at paper settings, 5,500 updates",
            rnnmt(
                "train",
                "--system",
                str(corpus / "system.json"),
                "--train",
                str(corpus / "train.pt"),
                "--valid",
                f"dev={corpus / 'dev.pt'}",
                *vocabs,
                "--out-dir",
                str(run),
                "--device",
                "cuda",
            ),
            300,
            run / "metrics.jsonl",
        ),
        Step(
            "bench paper, the same system",
            rnnmt("bench", "paper", "--only", "rnnsearch-50", "--device", "cuda", "--steps", "20", "--output", str(work / "bench-rnnsearch-50.json")),
            120,
            work / "bench-rnnsearch-50.json",
        ),
    ]
    steps["concurrent"] = [
        Step(
            f"{n} processes{' under MPS' if mps else ''}",
            rnnmt(
                "bench",
                "paper",
                "--concurrent",
                str(n),
                "--only",
                *SHARED_GPU,
                "--device",
                "cuda:0",
                "--seconds",
                "15",
                "--steps",
                "20",
                "--output",
                str(work / f"concurrent-{n}{'-mps' if mps else ''}.json"),
            ),
            150,
            work / f"concurrent-{n}{'-mps' if mps else ''}.json",
        )
        for mps, counts in ((False, (1, 2, 3)), (True, (2, 3)))
        for n in counts
    ]
    steps["multi30k"] = multi30k_steps(gpu_dir / "data" / "multi30k-en-de", work)
    return steps


def multi30k_steps(data: Path, work: Path) -> list[Step]:
    """Train, translate test_2016_flickr and score, once per precision: the BLEU and time of today's GPU code on real text."""
    vocab = ["--src-vocab", str(data / "vocab.en.json"), "--tgt-vocab", str(data / "vocab.de.json")]
    codes = ["--src-bpe", str(data / "bpe.joint.codes"), "--tgt-bpe", str(data / "bpe.joint.codes")]
    needs = [
        data / name for name in ("train.pt", "dev.pt", "vocab.en.json", "vocab.de.json", "bpe.joint.codes", "test.en", "test.de", "test.raw.de", "decode.json")
    ]
    steps = []
    for precision in MULTI30K_PRECISIONS:
        run, system = work / f"multi30k-{precision}", data / f"system-{precision}.json"
        train = rnnmt("train", "--system", str(system), "--train", str(data / "train.pt"), "--valid", f"dev={data / 'dev.pt'}", *vocab, *codes)
        translate = ["translate", "--model", str(run / "model.pt"), "--decode", str(data / "decode.json"), "--input", str(data / "test.en")]
        score = ["score", "--hyps", str(run / "test.de"), "--refs-tok", str(data / "test.de"), "--refs-raw", str(data / "test.raw.de")]
        steps += [
            Step(
                f"{MULTI30K_SYSTEM} precision {precision}: train", [*train, "--out-dir", str(run), "--device", "cuda"], 420, run / "meta.json", [*needs, system]
            ),
            Step(
                f"{MULTI30K_SYSTEM} precision {precision}: translate",
                rnnmt(*translate, "--output", str(run / "test.de"), "--batch-size", "64", "--device", "cuda"),
                120,
            ),
            Step(
                f"{MULTI30K_SYSTEM} precision {precision}: score test_2016_flickr",
                rnnmt(*score, "--src-tok", str(data / "test.en"), "--lang", "de", "--lowercase", "--output", str(run / "scores.json")),
                60,
                run / "scores.json",
            ),
        ]
    return steps


def realrun_rate(metrics: Path) -> dict:
    """The steady rate of the real run: the median of its logged target tokens/s after the first log point."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    rates = sorted(r["target_tokens_per_s"] for r in rows[1:] if "target_tokens_per_s" in r)
    return {"updates": len(rows), "logged_rates": len(rates), "median_target_tokens_per_s": rates[len(rates) // 2] if rates else None}


def step_result(output: Path) -> dict:
    """What the JSON keeps of a step's output: a real run's rate, a model's training record without its history, or the file."""
    if output.name == "metrics.jsonl":
        return realrun_rate(output)
    result = json.loads(output.read_text())
    if output.name == "meta.json":
        return {
            k: result[k]
            for k in ("updates", "best_update", "model_update", "stopped", "wall_time_s", "heldout_ppl", "settings", "recurrence_by_part", "device")
        }
    return {k: v for k, v in result.items() if k not in ("length_curve", "length_groups")}


def mps(start: bool, log) -> bool:
    """Start (or stop) an MPS control daemon for this measurement only, in pipe and log folders of its own."""
    control = shutil.which("nvidia-cuda-mps-control")
    if control is None:
        log("nvidia-cuda-mps-control is not on this machine: no MPS measurement")
        return False
    env = {**os.environ, "CUDA_MPS_PIPE_DIRECTORY": "/tmp/rnnmt-mps/pipe", "CUDA_MPS_LOG_DIRECTORY": "/tmp/rnnmt-mps/log"}
    for folder in ("/tmp/rnnmt-mps/pipe", "/tmp/rnnmt-mps/log"):
        os.makedirs(folder, exist_ok=True)
    if start:
        os.environ.update({k: env[k] for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")})
        return subprocess.run([control, "-d"], env=env).returncode == 0
    subprocess.run([control], input="quit\n", text=True, env=env)
    for key in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
        os.environ.pop(key, None)
    return True


def dry_run(plan: dict[str, list[Step]]) -> int:
    """Print every command; check that rnnmt parses each and that the prepared inputs exist."""
    sys.path.insert(0, str(ROOT / "src"))
    from rnnmt.cli import build_parser

    parser, missing = build_parser(), []
    for part, steps in plan.items():
        for step in steps:
            print(f"[{part}] {step.label} (at most {step.limit_s} s): {shlex.join(step.argv)}")
            if step.argv[1:3] == ["-m", "rnnmt.cli"]:
                parser.parse_args(step.argv[3:])
            missing += [str(p) for p in step.needs if not p.exists()]
    total = sum(step.limit_s for steps in plan.values() for step in steps)
    print(f"{sum(len(s) for s in plan.values())} commands; at most {total} s if every one ran to its limit")
    if missing:
        print(f"missing inputs (run `python3 scripts/gpu_check.py prepare` beside ../shared first): {', '.join(missing)}")
        return 1
    return 0


def run(plan: dict[str, list[Step]], out: Path, gpu_dir: Path) -> int:
    """Run the parts, each step within its limit; one log and one JSON under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    log_file = open(out / "gpu-check.log", "a", encoding="utf-8")
    t0 = time.monotonic()

    def log(message: str) -> None:
        line = f"[+{time.monotonic() - t0:.0f}s] {message}"
        print(line, flush=True)
        print(line, file=log_file, flush=True)

    site = "/tmp/rnnmt-gpu-site"
    if (wheels := sorted((gpu_dir / "wheels").glob("*.whl"))) and not Path(site).exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--target", site, *map(str, wheels)], check=False
        )
    os.environ.update(
        PYTHONPATH=os.pathsep.join([site, str(ROOT / "src"), str(ROOT / "tests")]), PYTHONUNBUFFERED="1", RNNMT_GPU_LOCK_DIR="/tmp/rnnmt-gpu-lock"
    )
    machine = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"], capture_output=True, text=True)
    results: dict = {"machine": machine.stdout.strip(), "commit": (ROOT / ".git").exists() and _commit(), "parts": {}}
    log(f"machine: {results['machine']}; python {sys.version.split()[0]}")
    failures = 0
    for part, steps in plan.items():
        results["parts"][part] = rows = []
        plain, shared = [s for s in steps if "MPS" not in s.label], [s for s in steps if "MPS" in s.label]
        for step in plain:
            rows.append(_run_step(part, step, log, log_file))
        if shared and mps(True, log):
            rows += [_run_step(part, step, log, log_file) for step in shared]
            mps(False, log)
        failures += sum(row["rc"] != 0 for row in rows)
        (out / "gpu-check.json").write_text(json.dumps(results, indent=1, default=str))
    log(f"done: {failures} step(s) failed")
    return 1 if failures else 0


def _run_step(part: str, step: Step, log, log_file) -> dict:
    """Run one step within its limit, its output into the log; its row for the JSON."""
    log(f"== {part}: {step.label}")
    began = time.monotonic()
    try:
        rc = subprocess.run(step.argv, cwd=ROOT, stdout=log_file, stderr=subprocess.STDOUT, timeout=step.limit_s).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    row = {"step": step.label, "rc": rc, "seconds": round(time.monotonic() - began, 1)}
    if rc == 0 and step.output is not None and step.output.exists():
        row["result"] = step_result(step.output)
    log(f"{step.label}: rc {rc} in {row['seconds']} s")
    return row


def _commit() -> str:
    return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()


def prepare(gpu_dir: Path) -> None:
    """Here, beside ../shared: the wheels the GPU machine lacks and the real-data samples, binarized, under `gpu_dir`."""
    for folder, what in ((SHARED, "the WMT'14 samples"), (MULTI30K, "the Multi30k files")):
        if not folder.exists():
            sys.exit(f"gpu_check prepare: {folder} does not exist; expected {what} beside the project (../shared/data).")
    gpu_dir.mkdir(parents=True, exist_ok=True)  # .gitignore keeps .gpu/ out of git; another folder: keep it out yourself
    wheels = gpu_dir / "wheels"
    platforms = [arg for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64") for arg in ("--platform", p)]
    locked = dict(re.findall(r"^([A-Za-z0-9_.-]+)==([^\s#]+)", (ROOT / "constraints.txt").read_text(), re.MULTILINE))
    download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    subprocess.run([*download, *platforms, "-d", str(wheels), *(f"{name}=={locked[name]}" for name in WHEELS)], check=True)
    for pair, spec in DATA.items():
        folder = gpu_dir / "data" / pair
        folder.mkdir(parents=True, exist_ok=True)
        src, tgt = pair.split("-")
        for split in ("train", "dev"):
            for lang, name in zip((src, tgt), spec[split]):
                tokenize = ["tokenize", "--lang", lang, "--input", str(SHARED / name), "--output", str(folder / f"{split}.{lang}")]
                subprocess.run(rnnmt(*tokenize, *(["--pretokenized"] if spec["tokenized"] else [])), check=True)
        for side, lang in (("src", src), ("tgt", tgt)):
            subprocess.run(
                rnnmt("vocab", "--input", str(folder / f"train.{lang}"), "--size", "30000", "--output", str(folder / f"vocab.{side}.json")), check=True
            )
        for split in ("train", "dev"):
            vocabs = ["--src-vocab", str(folder / "vocab.src.json"), "--tgt-vocab", str(folder / "vocab.tgt.json")]
            argv = [
                "binarize",
                "--src",
                str(folder / f"{split}.{src}"),
                "--tgt",
                str(folder / f"{split}.{tgt}"),
                *vocabs,
                "--output",
                str(folder / f"{split}.pt"),
            ]
            subprocess.run(rnnmt(*argv), check=True)
    prepare_multi30k(gpu_dir / "data" / "multi30k-en-de")
    print(f"prepared {gpu_dir}: carry it (device run: carry ['{gpu_dir.relative_to(ROOT)}']) and run `python3 scripts/gpu_check.py run --out $OUT` there")


def prepare_multi30k(folder: Path) -> None:
    """Multi30k en->de as the multi30k scale makes it (the task's preprocessing, joint BPE of the scale's merges, every
    unit), binarized, the test set's tokenized and raw references, and the system's settings per precision."""
    sys.path.insert(0, str(ROOT / "src"))
    from rnnmt import config as cfg

    config = cfg.load_files([ROOT / "config.yaml"], scale="multi30k")
    vocab = config["scales"]["multi30k"]["vocab"]
    folder.mkdir(parents=True, exist_ok=True)
    raw = {("train", lang): MULTI30K / "raw" / f"train.{lang}" for lang in ("en", "de")}
    raw |= {("dev", lang): MULTI30K / "raw" / f"val.{lang}" for lang in ("en", "de")}
    raw |= {("test", lang): MULTI30K / "raw" / f"test_2016_flickr.{lang}" for lang in ("en", "de")}
    for (split, lang), path in raw.items():
        subprocess.run(
            rnnmt("tokenize", "--lang", lang, "--lowercase", "--normalize-punctuation", "--input", str(path), "--output", str(folder / f"{split}.{lang}")),
            check=True,
        )
    shutil.copyfile(raw["test", "de"], folder / "test.raw.de")
    codes = folder / "bpe.joint.codes"
    subprocess.run(
        rnnmt("learn-bpe", "--input", str(folder / "train.en"), str(folder / "train.de"), "--merges", str(vocab["bpe_merges"]), "--output", str(codes)),
        check=True,
    )
    for lang in ("en", "de"):
        argv = [
            "vocab",
            "--input",
            str(folder / f"train.{lang}"),
            "--size",
            str(vocab["size"]),
            "--bpe",
            str(codes),
            "--output",
            str(folder / f"vocab.{lang}.json"),
        ]
        subprocess.run(rnnmt(*argv), check=True)
    vocabs = ["--src-vocab", str(folder / "vocab.en.json"), "--tgt-vocab", str(folder / "vocab.de.json"), "--src-bpe", str(codes), "--tgt-bpe", str(codes)]
    for split in ("train", "dev"):
        argv = ["binarize", "--src", str(folder / f"{split}.en"), "--tgt", str(folder / f"{split}.de"), *vocabs, "--output", str(folder / f"{split}.pt")]
        subprocess.run(rnnmt(*argv), check=True)
    system = cfg.training_settings(config, MULTI30K_SYSTEM)
    for precision in MULTI30K_PRECISIONS:
        settings = {**system, "train": {**system["train"], "precision": precision}}
        (folder / f"system-{precision}.json").write_text(json.dumps(settings, indent=1))
    (folder / "decode.json").write_text(json.dumps(cfg.resolve_system(config, MULTI30K_SYSTEM)["decode"], indent=1))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=["prepare", "run"])
    parser.add_argument("--gpu-dir", type=Path, default=ROOT / ".gpu", help="wheels and data for the GPU machine (default .gpu/)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/gpu-check")), help="run: where the log and JSON go (default $OUT)")
    parser.add_argument("--parts", nargs="+", default=None, help="run: which parts (default all: suite determinism precision realrun concurrent multi30k)")
    parser.add_argument("--dry-run", action="store_true", help="run: print and check every command without running it")
    a = parser.parse_args()
    if a.step == "prepare":
        prepare(a.gpu_dir.resolve())
        return 0
    work = a.out / "work" if a.dry_run else Path("/tmp/rnnmt-gpu-check")
    plan = parts(a.gpu_dir.resolve(), work)
    if unknown := set(a.parts or []) - set(plan):
        parser.error(f"unknown parts {', '.join(sorted(unknown))}; expected some of {', '.join(plan)}")
    plan = {name: steps for name, steps in plan.items() if a.parts is None or name in a.parts}
    return dry_run(plan) if a.dry_run else run(plan, a.out, a.gpu_dir.resolve())


if __name__ == "__main__":
    sys.exit(main())
