"""The Slurm and workstation profiles: which jobs ask for GPUs, and the sbatch lines the plugin writes
(stub sbatch/sacct/sacctmgr/scontrol on PATH record them; no cluster needed)."""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest

from test_workflow import ROOT, snakemake

pytest.importorskip("snakemake_executor_plugin_slurm", reason="the Slurm executor plugin is in the test extra")

SLURM = str(ROOT / "workflow" / "profiles" / "slurm")
GPU_RULES = {"train", "translate", "alignments"}


def planned_resources(dry_run: str) -> dict[str, set[str]]:
    """{rule: the resources lines of its jobs} from a dry run's job listing."""
    found: dict[str, set[str]] = {}
    rule = None
    for line in dry_run.splitlines():
        if match := re.match(r"^(?:local)?rule (\w+):$", line):
            rule = match.group(1)
        elif rule and line.strip().startswith("resources:"):
            found.setdefault(rule, set()).add(line.strip())
            rule = None
    return found


def test_slurm_dry_run_gives_gpus_to_training_and_decoding_only(tmp_path: Path):
    run = snakemake("-n", "--workflow-profile", SLURM, "--directory", str(tmp_path))
    assert run.returncode == 0, run.stderr[-2000:]
    resources = planned_resources(run.stdout)
    assert GPU_RULES <= set(resources) and len(resources) > 10
    for rule, lines in resources.items():
        has_gpu = {", gpu=1," in line + "," for line in lines}
        assert has_gpu == {rule in GPU_RULES}, (rule, lines)
    train = resources["train"].pop()
    assert "slurm_extra=--signal=USR1@600" in train and "runtime=1440" in train


# Each call goes to a file of its own: the plugin submits jobs in parallel, and appends to one file interleave.
STUB = """#!/usr/bin/env bash
{{ printf '%s' {name}; printf ' %q' "$@"; printf '\\n'; }} > "$(mktemp "$STUB_DIR/{name}.XXXXXX")"
{reply}
"""
REPLIES = {
    "sbatch": "echo 4242",
    "sacct": "echo '4242|FAILED'",  # every job fails at once, so the run ends without waiting
    "sacctmgr": "echo testacct",
    "scontrol": "",
    "squeue": "",
    "sinfo": "",
    "scancel": "",
}


def stub_path(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, reply in REPLIES.items():
        (bin_dir / name).write_text(STUB.format(name=name, reply=reply))
        (bin_dir / name).chmod(0o755)
    return bin_dir


def filled_profile(tmp_path: Path) -> str:
    """The shipped Slurm profile with its CHANGE_ME_* values filled in (account testacct, partitions cpu and gpu)."""
    text = (Path(SLURM) / "config.yaml").read_text()
    for placeholder, value in {"CHANGE_ME_ACCOUNT": "testacct", "CHANGE_ME_CPU_PARTITION": "cpu", "CHANGE_ME_GPU_PARTITION": "gpu"}.items():
        text = text.replace(placeholder, value)
    assert "CHANGE_ME_" not in text
    (tmp_path / "profile").mkdir()
    (tmp_path / "profile" / "config.yaml").write_text(text)
    return str(tmp_path / "profile")


def test_a_run_with_the_profiles_placeholders_stops_before_any_job(tmp_path: Path, monkeypatch):
    """The shipped profile as it is: one line naming each setting to fill in, a non-zero exit and nothing submitted."""
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("STUB_DIR", str(calls))
    monkeypatch.setenv("PATH", f"{stub_path(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    run = snakemake("--workflow-profile", SLURM, "--directory", str(tmp_path / "work"))
    assert run.returncode != 0
    lines = [line for line in run.stderr.splitlines() if line.startswith("rnnmt:")]
    assert lines == [
        "rnnmt: the Snakemake profile still holds CHANGE_ME_* values (default-resources: slurm_account; default-resources: "
        "slurm_partition; set-resources: train: slurm_partition; set-resources: translate: slurm_partition; set-resources: "
        "alignments: slurm_partition): set them for your cluster in the profile (docs/cluster.md)."
    ], run.stderr[-3000:]
    assert not list(calls.glob("sbatch.*"))


def test_slurm_submissions_carry_the_gpu_and_early_warning_flags(tmp_path: Path, monkeypatch):
    """A training, a translation and a CPU job submitted through the profile to stub Slurm commands."""
    work = tmp_path / "work"
    inputs = [
        "results/config/rnnsearch-30.json",
        "results/config/decode/rnnsearch-50.json",
        "results/data/bin/en-fr/train.pt",
        "results/data/bin/en-fr/dev.pt",
        "results/data/vocab/en-fr/vocab.en.json",
        "results/data/vocab/en-fr/vocab.fr.json",
        "results/data/tok/en-fr/test.en",
        "results/data/tok/en-fr/test.fr",
    ]
    outputs = ["results/models/rnnsearch-50/model.pt", "results/models/rnnsearch-50/meta.json"]
    for i, name in enumerate(inputs + outputs):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("stand-in\n")
        os.utime(work / name, (1_000_000 + i, 1_000_000 + i))  # inputs older than the trained model
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("STUB_DIR", str(calls))
    monkeypatch.setenv("PATH", f"{stub_path(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    targets = ["results/models/rnnsearch-30/model.pt", "results/translations/rnnsearch-50/test.all.txt", "results/data/nounk/en-fr/test.ids"]
    # --allowed-rules: the stand-in files have no upstream; the account is one the stub sacctmgr knows.
    snakemake(
        *targets,
        "--allowed-rules",
        "train",
        "translate",
        "nounk_subset",
        "--workflow-profile",
        filled_profile(tmp_path),
        "--directory",
        str(work),
        "--retries",
        "0",
        "--slurm-init-seconds-before-status-checks",
        "1",
        cwd=work,
    )
    submitted = {}
    for call in sorted(calls.glob("sbatch.*")):
        args = shlex.split(call.read_text())
        rule = re.match(r"rule_(\w+?)_wildcards", args[args.index("--comment") + 1]).group(1)
        submitted[rule] = args
    assert set(submitted) == {"train", "translate", "nounk_subset"}, sorted(p.name for p in calls.iterdir())
    train, translate, cpu = submitted["train"], submitted["translate"], submitted["nounk_subset"]
    assert "--gpus=1" in train and "--signal=USR1@600" in train and train[train.index("-t") + 1] == "1440"
    assert "--gpus=1" in translate and "--signal=USR1@600" not in translate
    assert not any(a.startswith(("--gpus", "--gres")) for a in cpu)
    assert cpu[cpu.index("-p") + 1] == "cpu" and train[train.index("-p") + 1] == "gpu" and train[train.index("-A") + 1] == "testacct"
