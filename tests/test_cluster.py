"""The Slurm and workstation profiles: which jobs ask for GPUs, and the sbatch lines the plugin writes
(stub sbatch/sacct/sacctmgr/scontrol on PATH record them; no cluster needed)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SYSTEM_CHANGES, system_changes_needed
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
    # Every job is done at once, without its outputs (--latency-wait 0 below): the run stops at its first status check,
    # and at once (after a failed job the Slurm plugin waits 10 s longer before its next check).
    "sacct": "echo '4242|COMPLETED'",
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


# The shipped profile's settings that hold a CHANGE_ME_* value, as the stop and the dry run's warning name them.
UNFILLED = (
    "the Snakemake profile still holds CHANGE_ME_* values (default-resources: slurm_account; default-resources: slurm_partition; "
    "set-resources: train: slurm_partition; set-resources: translate: slurm_partition; set-resources: alignments: slurm_partition): "
    "set them for your cluster in the profile (docs/cluster.md)"
)


def rnnmt_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("rnnmt:")]


def test_a_run_with_the_profiles_placeholders_stops_before_any_job(tmp_path: Path, monkeypatch):
    """The shipped profile as it is: one line naming each setting to fill in, a non-zero exit and nothing submitted."""
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("STUB_DIR", str(calls))
    monkeypatch.setenv("PATH", f"{stub_path(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    run = snakemake("--workflow-profile", SLURM, "--directory", str(tmp_path / "work"))
    assert run.returncode != 0
    assert rnnmt_lines(run.stderr) == [f"rnnmt: {UNFILLED}."], run.stderr[-3000:]
    assert not list(calls.glob("sbatch.*"))


def test_a_dry_run_with_the_profiles_placeholders_warns_naming_each_and_still_lists_the_jobs(tmp_path: Path):
    """The dry run, what a user runs first, warns where the run itself would stop; a filled-in profile, no warning."""
    shipped = snakemake("-n", "--workflow-profile", SLURM, "--directory", str(tmp_path / "work"))
    assert shipped.returncode == 0 and "rule train:" in shipped.stdout, shipped.stderr[-3000:]
    assert rnnmt_lines(shipped.stderr) == [f"rnnmt: warning: {UNFILLED}; until then a run stops before its first job."], shipped.stderr[-3000:]
    filled = snakemake("-n", "--workflow-profile", filled_profile(tmp_path), "--directory", str(tmp_path / "work"))
    assert filled.returncode == 0 and rnnmt_lines(filled.stderr) == [], filled.stderr[-3000:]


def stand_in_work(tmp_path: Path) -> Path:
    """A work folder whose inputs of one training, one translation and one CPU job exist as stand-ins (older than the
    trained model), so that a run submits exactly those three (SUBMITTED, with --allowed-rules)."""
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
        os.utime(work / name, (1_000_000 + i, 1_000_000 + i))
    return work


# The three jobs stand_in_work prepares, and what else a run of them needs (--allowed-rules: the stand-ins have no
# upstream; an account the stub sacctmgr knows; no retries, status checks at once, no wait for the missing outputs).
SUBMITTED = ["results/models/rnnsearch-30/model.pt", "results/translations/rnnsearch-50/test.all.txt", "results/data/nounk/en-fr/test.ids"]
SUBMIT_OPTIONS = [
    *("--allowed-rules", "train", "translate", "nounk_subset"),
    *("--retries", "0", "--slurm-init-seconds-before-status-checks", "1", "--latency-wait", "0"),
]


def submissions(calls: Path) -> dict[str, list[str]]:
    """Each rule's sbatch command line, as the stub sbatch recorded it."""
    submitted = {}
    for call in sorted(calls.glob("sbatch.*")):
        args = shlex.split(call.read_text())
        submitted[re.match(r"rule_(\w+?)_wildcards", args[args.index("--comment") + 1]).group(1)] = args
    return submitted


def test_slurm_submissions_carry_the_gpu_and_early_warning_flags(tmp_path: Path, monkeypatch):
    """A training, a translation and a CPU job submitted through the profile to stub Slurm commands."""
    work = stand_in_work(tmp_path)
    calls = tmp_path / "calls"
    calls.mkdir()
    monkeypatch.setenv("STUB_DIR", str(calls))
    monkeypatch.setenv("PATH", f"{stub_path(tmp_path)}{os.pathsep}{os.environ['PATH']}")
    snakemake(*SUBMITTED, *SUBMIT_OPTIONS, "--workflow-profile", filled_profile(tmp_path), "--directory", str(work), cwd=work)
    submitted = submissions(calls)
    assert set(submitted) == {"train", "translate", "nounk_subset"}, sorted(p.name for p in calls.iterdir())
    train, translate, cpu = submitted["train"], submitted["translate"], submitted["nounk_subset"]
    assert "--gpus=1" in train and "--signal=USR1@600" in train and train[train.index("-t") + 1] == "1440"
    assert "--gpus=1" in translate and "--signal=USR1@600" not in translate
    assert not any(a.startswith(("--gpus", "--gres")) for a in cpu)
    assert cpu[cpu.index("-p") + 1] == "cpu" and train[train.index("-p") + 1] == "gpu" and train[train.index("-A") + 1] == "testacct"


DRIVER = ROOT / "scripts" / "slurm_snakemake.sh"


def test_snakemake_as_a_slurm_job_runs_from_the_submit_folder_and_submits_every_rule(tmp_path: Path, monkeypatch):
    """scripts/slurm_snakemake.sh as Slurm runs a batch script: a copy in a spool folder, in a job's environment; it finds
    the project by SLURM_SUBMIT_DIR and Snakemake submits each rule as a job of its own, with the profile's flags."""
    work = stand_in_work(tmp_path)
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "slurm_script").write_text(DRIVER.read_text())
    calls = tmp_path / "calls"
    calls.mkdir()
    python_bin = Path(sys.executable).parent  # where pip put the snakemake command
    env = {
        **os.environ,
        "STUB_DIR": str(calls),
        "PATH": f"{stub_path(tmp_path)}{os.pathsep}{python_bin}{os.pathsep}{os.environ['PATH']}",
        "SLURM_JOB_ID": "77",
        "SLURM_SUBMIT_DIR": str(ROOT),
        "SLURM_CPUS_PER_TASK": "1",
        "RNNMT_PROFILE": filled_profile(tmp_path),
    }
    run = subprocess.run(
        ["bash", str(spool / "slurm_script"), *SUBMITTED, *SUBMIT_OPTIONS, "--directory", str(work)], env=env, capture_output=True, text=True, timeout=600
    )
    assert f"rnnmt: Snakemake as Slurm job 77 in {ROOT} with the profile {env['RNNMT_PROFILE']}" in run.stdout, run.stderr[-3000:]
    assert "You are running snakemake in a SLURM job context" in run.stderr  # the plugin saw the job (and clears SLURM_*: its code)
    submitted = submissions(calls)
    assert set(submitted) == {"train", "translate", "nounk_subset"}, run.stderr[-3000:]
    assert "--gpus=1" in submitted["train"] and submitted["train"][submitted["train"].index("-A") + 1] == "testacct"
    missing = subprocess.run(["bash", str(DRIVER)], env={**env, "RNNMT_PROFILE": "no/such/profile"}, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and missing.stderr.startswith(f"rnnmt: no Snakemake profile at {ROOT}/no/such/profile/config.yaml;")


def test_the_test_slurm_cluster_changes_nothing_on_this_machine_unless_allowed(tmp_path: Path):
    """tests/slurm/cluster.sh start without RNNMT_TEST_SYSTEM_CHANGES: exit 3 (the Slurm tests skip) with one line saying
    what it would need and how to allow it, before it installs, writes or starts anything."""
    state = tmp_path / "slurm"
    env = {**{k: v for k, v in os.environ.items() if k != SYSTEM_CHANGES}, "RNNMT_SLURM_DIR": str(state)}
    run = subprocess.run(["bash", str(ROOT / "tests" / "slurm" / "cluster.sh"), "start"], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 3 and run.stdout == "", run.stderr
    assert run.stderr.splitlines() == [
        system_changes_needed(
            "cannot run a test Slurm cluster: it needs root, slurm-wlm and munge (installed with apt-get where missing), "
            "and starts munged, slurmctld and slurmd on this machine"
        )
    ]
    assert not state.exists()
