"""The Slurm profile on a real one-node Slurm (tests/slurm/cluster.sh starts munged, slurmctld and slurmd on
this machine, two stand-in GPUs, partitions cpu and gpu): where the tiny workflow's jobs run and with which
GPU requests, a training job stopped by the profile's early warning, by the clock before its time limit and by
scancel's SIGTERM, resubmitted each time, and a killed Snakemake recovered by the README's steps. Needs root; the
whole module is skipped with one line otherwise."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import yaml

from rnnmt.models.artifact import load_model

from test_workflow import ROOT, SNAKEMAKE

pytest.importorskip("snakemake_executor_plugin_slurm", reason="the Slurm executor plugin is in the test extra")
pytestmark = pytest.mark.integration

CLUSTER = ROOT / "tests" / "slurm" / "cluster.sh"
PROFILE = ROOT / "workflow" / "profiles" / "slurm" / "config.yaml"
TINY = str(ROOT / "tests" / "config" / "tiny.yaml")
TABLE = "results/tables/bahdanau2014_table1.csv"  # four trainings, eight translations, four scores
GPU_RULES = {"train", "translate", "alignments"}
SYSTEM = "rnnsearch-50"
MODEL = f"results/models/{SYSTEM}/model.pt"
SCORES = f"results/scores/{SYSTEM}.json"  # one training, its two translations (All and No-UNK), their score
MODELS = [f"results/models/{system}/model.pt" for system in ("rnnencdec-30", "rnnsearch-30", "rnnencdec-50", SYSTEM)]  # the table's


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running cluster for the module; SLURM_CONF points every client command (and snakemake) at it."""
    if os.geteuid() != 0:
        pytest.skip("a real Slurm needs root here (munged, slurmctld, slurmd and apt-get); run as root to test the Slurm profile")
    # Own ports, so that a second test run or a site's Slurm on this machine does not collide.
    env = {
        **os.environ,
        "RNNMT_SLURM_DIR": str(tmp_path_factory.mktemp("slurm")),
        "RNNMT_SLURMCTLD_PORT": str(free_port()),
        "RNNMT_SLURMD_PORT": str(free_port()),
    }
    started = subprocess.run(["bash", str(CLUSTER), "start"], env=env, capture_output=True, text=True, timeout=900)
    if started.returncode == 3:
        pytest.skip(started.stderr.strip().splitlines()[-1])
    assert started.returncode == 0, started.stderr
    conf = subprocess.run(["bash", str(CLUSTER), "env"], env=env, capture_output=True, text=True, check=True).stdout.strip()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLURM_CONF", conf.split("=", 1)[1])
        yield
    stopped = subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, text=True, timeout=300)
    assert stopped.returncode == 0, stopped.stderr


def slurm_profile(directory: Path, **train) -> Path:
    """The shipped profile, filled in for the test cluster and scaled to one node with 2 CPUs.

    `train` replaces resources of the train rule (runtime, slurm_extra)."""
    profile = yaml.safe_load(PROFILE.read_text())
    profile["default-resources"].update(slurm_account="rnnmt", slurm_partition="cpu", mem_mb=500, runtime="10m")
    for resources in profile["set-resources"].values():
        # One CPU per GPU job so that two run at once on the node's two CPUs; the profile's memory would not fit.
        if resources.get("slurm_partition") == "CHANGE_ME_GPU_PARTITION":
            resources.update(slurm_partition="gpu", cpus_per_gpu=1, mem_mb=1000)
        else:
            resources.update(mem_mb=500)
    profile["set-resources"]["train"].update(train)
    # One torch thread per job, as in the local reference run: the tables are compared bit for bit. One tokenizing
    # process per job, so that the eight tokenize jobs run two at a time on the node's two CPUs.
    profile["set-threads"] = {"train": 1, "translate": 1, "tokenize": 1}
    profile.update(
        {
            "jobs": 4,
            "latency-wait": 5,  # one file system: no delay to wait for
            # Without slurmdbd, sacct fails ("Slurm accounting storage is disabled") and the plugin's default status
            # command is sacct whenever the binary exists; squeue sees finished jobs for MinJobAge (an hour here).
            "slurm-status-command": "squeue",
            # The plugin checks `init` s after a submission, and each check that finds no job ended waits 10 s longer
            # before the next (init, init + 10, init + 20 s apart). A job here takes 5 to 10 s (two Snakemake start-ups
            # and the command; longer on a slower CPU): a first check at 11 s finds most ended, where one at 2 s finds
            # none and the next comes 12 s later (the tiny run from nothing: 218 -> 200 s with a core busy, 214 -> 189 s
            # without). The default 40 s would dominate.
            "slurm-init-seconds-before-status-checks": 11,
            "slurm-keep-successful-logs": True,
        }
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.yaml").write_text(yaml.safe_dump(profile, sort_keys=False))
    return directory


def command(workdir: Path, *args: str, profile: Path | None = None, configs: tuple[str, ...] = (TINY,)) -> list[str]:
    use = ("--workflow-profile", str(profile)) if profile else ("--cores", "2")
    # Targets before --configfile, which takes every following word.
    return [*SNAKEMAKE, *args, *use, "--directory", str(workdir), "--configfile", *configs]


def run(cmd: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def slurm_jobs(workdir: Path) -> list[dict[str, str]]:
    """Every job of this cluster submitted from `workdir`, oldest first, as `scontrol show job` fields.

    Without accounting this is the record of finished jobs too (MinJobAge keeps them for an hour)."""
    out = subprocess.run(["scontrol", "show", "job", "--details", "--oneliner"], capture_output=True, text=True, check=True).stdout
    jobs = [dict(re.findall(r"(\S+?)=(\S*)", line)) for line in out.splitlines() if line.strip()]
    mine = [job for job in jobs if job.get("WorkDir") == str(workdir)]
    for job in mine:
        job["rule"] = re.match(r"rule_([a-z0-9_]+?)(_wildcards_|$)", job["Comment"]).group(1)
    return sorted(mine, key=lambda job: int(job["JobId"]))


def local_rules(stdout: str) -> set[str]:
    return set(re.findall(r"^localrule (\w+):$", stdout, re.MULTILINE))


def submitted_rules(stdout: str) -> set[str]:
    return set(re.findall(r"^rule (\w+):$", stdout, re.MULTILINE))


def parameters(model: Path) -> dict[str, torch.Tensor]:
    return dict(load_model(model, torch.device("cpu")).model.state_dict())


@pytest.fixture(scope="module")
def local_run(tmp_path_factory) -> Path:
    """The BLEU table of the tiny workflow run locally, without any profile: what the cluster must reproduce."""
    workdir = tmp_path_factory.mktemp("local")
    done = run(command(workdir, TABLE), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return workdir


def preprocessed_copy(local: Path, workdir: Path) -> Path:
    """`workdir` with the local run's data (mtimes kept, so nothing upstream of training reruns)."""
    shutil.copytree(local / "results" / "data", workdir / "results" / "data")
    return workdir


def test_the_workflow_through_the_profile_puts_gpu_jobs_on_gpus_and_gives_the_local_scores(cluster, local_run, tmp_path):
    """One system's scores from nothing: every stage before them as Slurm jobs (data, training, both translations)."""
    workdir = tmp_path / "work"
    done = run(command(workdir, SCORES, profile=slurm_profile(tmp_path / "profile")), timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = slurm_jobs(workdir)
    remote = submitted_rules(done.stdout + done.stderr)
    local = local_rules(done.stdout + done.stderr)
    assert {"train", "translate", "score", "tokenize", "build_vocab", "binarize"} <= remote and {"settings"} <= local, (remote, local)
    # Exactly the non-local rules went to Slurm, each job once (no failure, no resubmission), all of them done.
    assert {job["rule"] for job in jobs} == remote and not remote & local
    assert len(jobs) == len(re.findall(r"^rule \w+:$", done.stdout + done.stderr, re.MULTILINE))
    assert {job["JobState"] for job in jobs} == {"COMPLETED"}, [(j["rule"], j["JobState"]) for j in jobs]
    for job in jobs:
        gpu = job["rule"] in GPU_RULES
        assert job["Partition"] == ("gpu" if gpu else "cpu"), job
        assert (job.get("TresPerJob") == "gres:gpu:1") == gpu, job  # the request, sbatch --gpus=1
        assert (job["JOB_GRES"] == "gpu:1") == gpu, job  # and what Slurm gave it
    assert [job["rule"] for job in jobs].count("train") == 1 and [job["rule"] for job in jobs].count("translate") == 2
    assert (workdir / SCORES).read_text() == (local_run / SCORES).read_text()


# rnnsearch-50 trains 6,000 updates (15 to 80 a second here, the slowest with the uninterrupted run beside it: 75 s
# to 7 min; another module's tests may run beside both) in the tests below, each stopped once or more on the way.
# No periodic checkpoint before the end: a resumed run starts from a checkpoint that a stop made rnnmt write.
UPDATES = 6000
LONG = f"systems:\n  {SYSTEM}: {{overrides: {{demo: {{train: {{updates: {UPDATES}, checkpoint_every: 9000, valid_every: 1500, log_every: 100}}}}}}}}\n"
TRAIN_LOG = f"results/logs/train/{SYSTEM}.log"
STOPPED = re.compile(r"\] ([^]\n]+); checkpoint at update (\d+) written")  # rnnmt's line: why, at which update


@pytest.fixture(scope="module")
def long_configs(tmp_path_factory) -> tuple[str, ...]:
    overlay = tmp_path_factory.mktemp("long") / "long.yaml"
    overlay.write_text(LONG)
    return (TINY, str(overlay))


@pytest.fixture(scope="module")
def uninterrupted(local_run, long_configs, tmp_path_factory) -> Iterator[Callable[[], Path]]:
    """The long training run locally without a stop, started beside the first test that asks for it (a core each);
    calling the fixture's value waits for its model."""
    workdir = preprocessed_copy(local_run, tmp_path_factory.mktemp("uninterrupted"))
    log = workdir / "snakemake.log"
    with log.open("w") as out:
        straight = subprocess.Popen(command(workdir, MODEL, configs=long_configs), cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def model() -> Path:
        assert straight.wait(timeout=1800) == 0, log.read_text()[-3000:]
        return workdir / MODEL

    yield model
    if straight.poll() is None:  # no test waited for it (they failed first)
        os.killpg(straight.pid, signal.SIGTERM)
        straight.wait(timeout=60)


def assert_same_parameters(model: Path, expected: Path) -> None:
    got, want = parameters(model), parameters(expected)
    assert got.keys() == want.keys() and all(torch.equal(got[name], value) for name, value in want.items()), model


def minutes(limit: str) -> int:
    """A TimeLimit or RunTime of `scontrol show job` under a day (HH:MM:SS), in whole minutes."""
    hours, mins, _ = (int(part) for part in limit.split(":"))
    return 60 * hours + mins


def assert_resumed_after_each_stop(workdir: Path, logs: str, runtime: Callable[[int], int]) -> list[dict[str, str]]:
    """The training's Slurm jobs, oldest first, after checking that each attempt had `runtime(attempt)` minutes, that
    all but the last wrote a checkpoint when they were stopped and the next resumed from it, and that the last
    finished the training. `logs`: Snakemake's output, which holds each failed attempt's rule log (the profile's
    show-failed-logs), and the rule's log, which holds the last attempt's."""
    trains = [job for job in slurm_jobs(workdir) if job["rule"] == "train"]
    assert len(trains) >= 2, trains
    assert [minutes(job["TimeLimit"]) for job in trains] == [runtime(attempt) for attempt in range(1, len(trains) + 1)], trains
    assert trains[-1]["JobState"] == "COMPLETED", trains
    stopped_at = [int(update) for _, update in STOPPED.findall(logs)]
    resumed_at = [int(u) for u in re.findall(r"resumed from \S+ at update (\d+)", logs)]
    assert len(stopped_at) == len(trains) - 1 and 0 < stopped_at[0] and stopped_at == sorted(stopped_at) and stopped_at[-1] < UPDATES, stopped_at
    assert resumed_at == stopped_at, (stopped_at, resumed_at)
    assert json.loads((workdir / f"results/models/{SYSTEM}/meta.json").read_text())["updates"] == UPDATES
    return trains


def test_a_training_job_warned_before_its_time_limit_is_resubmitted_and_ends_as_an_uninterrupted_run(cluster, local_run, long_configs, uninterrupted, tmp_path):
    """The profile's time limits and warning scaled down: attempt³ minutes (1, 8, 27) and USR1 10 s before the end,
    so two or three attempts. Slurm sends the warning up to 60 s early (sbatch(1), --signal); 22.05 sends it at its
    first 30-second check within warning + 30 s of the end, so 20 to 50 s into the first attempt: after rnnmt has
    started, before the training is done; the later attempts have room for the rest down to about 3 updates a second.
    Every limit is shorter than rnnmt's stop-before-limit (900 s), so only the warning stops it."""
    workdir = preprocessed_copy(local_run, tmp_path / "work")
    signal_at = re.sub(r"@\d+", "@10", yaml.safe_load(PROFILE.read_text())["set-resources"]["train"]["slurm_extra"])
    profile = slurm_profile(tmp_path / "profile", runtime="attempt ** 3", slurm_extra=signal_at)
    done = run(command(workdir, MODEL, profile=profile, configs=long_configs), timeout=2400)  # at most 1 + 8 + 27 minutes of attempts
    assert done.returncode == 0, done.stderr[-3000:]
    logs = done.stdout + done.stderr + (workdir / TRAIN_LOG).read_text()
    trains = assert_resumed_after_each_stop(workdir, logs, lambda attempt: attempt**3)
    # Stopped before the limit: the job FAILED (its Snakemake exits 1 when rnnmt exits 143) instead of TIMEOUT.
    assert {job["JobState"] for job in trains[:-1]} == {"FAILED"} and all(job["RunTime"] < job["TimeLimit"] for job in trains[:-1]), trains
    assert {why for why, _ in STOPPED.findall(logs)} == {"SIGUSR1 received"}
    assert_same_parameters(workdir / MODEL, uninterrupted())


def test_a_training_job_stopped_by_the_clock_then_cancelled_resumes_each_time_and_ends_as_an_uninterrupted_run(
    cluster, local_run, long_configs, uninterrupted, tmp_path
):
    """The shipped profile with limits of 15 + attempt³ minutes (16, 23, 42). (1) Slurm 22.05 exports no
    SLURM_JOB_END_TIME: rnnmt asks squeue for the job's end and stops by the clock --stop-before-limit (900 s) before
    it, 1 minute into the first attempt, before the profile's USR1 (600 s before the end) can come. (2) The second
    attempt, once its log shows progress after resuming (a state), is cancelled: scancel sends SIGTERM as pre-emption
    does, rnnmt checkpoints and exits 143, and the plugin reports the CANCELLED job as failed, so Snakemake resubmits
    it (retries). The third resumes and finishes."""
    workdir = preprocessed_copy(local_run, tmp_path / "work")
    train_log = workdir / TRAIN_LOG
    output = tmp_path / "snakemake.log"
    with output.open("w") as out:
        cmd = command(workdir, MODEL, profile=slurm_profile(tmp_path / "profile", runtime="15 + attempt ** 3"), configs=long_configs)
        submitter = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def resumed_and_training() -> bool:
        after = train_log.read_text().partition("resumed from")[2] if train_log.exists() else ""
        return re.search(rf"\] update \d+/{UPDATES} ", after) is not None

    wait_for(lambda: resumed_and_training() or submitter.poll() is not None, "the second attempt's progress")
    running = [job["JobId"] for job in slurm_jobs(workdir) if job["rule"] == "train" and job["JobState"] == "RUNNING"]
    assert len(running) == 1, f"expected the second attempt running, found {running}: {output.read_text()[-3000:]}"
    subprocess.run(["scancel", *running], check=True)
    assert submitter.wait(timeout=2400) == 0, output.read_text()[-3000:]

    logs = output.read_text() + train_log.read_text()
    trains = assert_resumed_after_each_stop(workdir, logs, lambda attempt: 15 + attempt**3)
    assert [job["JobState"] for job in trains] == ["FAILED", "CANCELLED", "COMPLETED"] and trains[1]["JobId"] == running[0], trains
    # Each attempt read its own job's end from squeue. The first stopped by the clock long before USR1 could come (up
    # to 660 s before the end); the second on SIGTERM, which the plugin reported as a failure.
    assert sorted(re.findall(r"\(squeue -j (\d+)\): will checkpoint and stop 900 s before", logs), key=int) == [job["JobId"] for job in trains]
    (clock, _), (cancel, _) = STOPPED.findall(logs)
    assert clock.startswith("the job's time limit is near") and cancel == "SIGTERM received", (clock, cancel)
    assert minutes(trains[0]["TimeLimit"]) - minutes(trains[0]["RunTime"]) > 11 and "SIGUSR1" not in logs, trains[0]
    assert f"SLURM-job '{running[0]}' failed, SLURM status is: 'CANCELLED'" in logs
    assert_same_parameters(workdir / MODEL, uninterrupted())


def finished_trainings(log: str) -> set[str]:
    """The models whose training a Snakemake log reports finished."""
    outputs = dict(re.findall(r"^rule train:\n(?:    .*\n)*?    output: ([^,\n]+).*\n(?:    .*\n)*?    jobid: (\d+)$", log, re.MULTILINE))
    done = set(re.findall(r"^Finished jobid: (\d+) \(Rule: train\)$", log, re.MULTILINE))
    return {model for model, jobid in outputs.items() if jobid in done}


def held_jobs(workdir: Path) -> list[str]:
    """The jobs from `workdir` that wait for a release (submitted with --hold), oldest first."""
    return [job["JobId"] for job in slurm_jobs(workdir) if job["JobState"] == "PENDING" and job["Reason"].startswith("JobHeld")]


def wait_for(condition: Callable[[], object], what: str, guard: float = 1800) -> None:
    """Poll until `condition` holds. `guard` only ends a test that would otherwise hang; nothing here is timed."""
    give_up = time.monotonic() + guard
    while not condition():
        assert time.monotonic() < give_up, f"still waiting for {what} after {guard:.0f} s"
        time.sleep(0.2)


@contextmanager
def releasing_held_jobs(workdir: Path) -> Iterator[None]:
    """Release every held job from `workdir` as it appears, for as long as the block runs."""
    stop = threading.Event()

    def release() -> None:
        while not stop.wait(0.5):
            if held := held_jobs(workdir):
                subprocess.run(["scontrol", "release", *held], capture_output=True)

    releaser = threading.Thread(target=release, daemon=True)
    releaser.start()
    try:
        yield
    finally:
        stop.set()
        releaser.join()


def test_a_killed_snakemake_then_scancel_unlock_and_the_same_command_finishes_the_run(cluster, local_run, tmp_path):
    """The table's four trainings, submitted held: one is released, and once Snakemake has seen it finish it is
    killed with the other three still queued (a state, whatever the machine's load). The same command then
    finishes the run, its held jobs released as they come."""
    workdir = preprocessed_copy(local_run, tmp_path / "work")
    shipped = yaml.safe_load(PROFILE.read_text())["set-resources"]["train"]["slurm_extra"]
    cmd = command(workdir, *MODELS, profile=slurm_profile(tmp_path / "profile", slurm_extra=shipped[:-1] + " --hold'"))
    log = tmp_path / "killed.log"
    with log.open("w") as out:
        submitter = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    wait_for(lambda: held_jobs(workdir) or submitter.poll() is not None, "a held training job")
    subprocess.run(["scontrol", "release", held_jobs(workdir)[0]], check=True)
    wait_for(lambda: finished_trainings(log.read_text()) or submitter.poll() is not None, "Snakemake to see the released training finish")
    os.killpg(submitter.pid, signal.SIGKILL)  # the login node's snakemake dies; its Slurm jobs do not
    submitter.wait(timeout=60)
    finished = {model: (workdir / model).stat().st_mtime_ns for model in finished_trainings(log.read_text())}
    alive = [job["JobId"] for job in slurm_jobs(workdir) if job["JobState"] in ("PENDING", "RUNNING")]
    assert len(finished) == 1 and len(alive) == 3, f"expected one training finished and three queued (finished: {finished}, queued: {alive})"

    # The README's steps: scancel the dead run's jobs, unlock, the same command again.
    subprocess.run(["scancel", *alive], check=True)
    locked = run(cmd)
    assert locked.returncode != 0 and "cannot be locked" in locked.stderr, locked.stderr[-3000:]
    assert run([*cmd, "--unlock"]).returncode == 0
    with releasing_held_jobs(workdir):
        again = run(cmd)
    assert again.returncode == 0, again.stderr[-3000:]
    # What had finished was not redone, and every model is the local run's, bit for bit.
    assert {model: (workdir / model).stat().st_mtime_ns for model in finished} == finished
    for model in MODELS:
        assert_same_parameters(workdir / model, local_run / model)
