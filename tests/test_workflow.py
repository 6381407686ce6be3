"""The Snakemake workflow: lint, dry run, config errors before any job, and a tiny end-to-end run with its report."""

from __future__ import annotations

import csv
import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from rnnmt.data import sources
from rnnmt.metrics_file import read_metrics

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


def snakemake(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_dry_run_of_the_demo_plans_every_stage(tmp_path):
    run = snakemake("-n", "--directory", str(tmp_path))
    assert run.returncode == 0, run.stderr
    for rule in ("generate_demo_corpus", "tokenize", "select_data", "build_vocab", "train", "translate", "score", "table"):
        assert rule in run.stdout, rule
    assert "rnnsearch-50star" not in run.stdout  # a paper-only system
    assert "luong2015_table2" not in run.stdout  # no ensemble at the demo scale: no decoding added to it


def test_lint_has_only_the_documented_environment_lint():
    run = snakemake("--lint")
    text = run.stdout + run.stderr
    lints = [line.strip() for line in text.splitlines() if line.strip().startswith("* ")]
    assert lints and set(lints) == {"* Specify a conda environment or container for each rule.:"}


def test_unknown_config_key_stops_before_any_job(tmp_path):
    run = snakemake("--cores", "1", "--directory", str(tmp_path), "--config", "evalution=3")
    assert run.returncode != 0
    assert "unknown key 'evalution'" in run.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize(("folder", "what"), [("nowhere/wmt14", "does not exist"), ("a-file", "is not a folder")])
def test_a_download_dir_that_is_not_a_folder_stops_before_any_job(tmp_path, folder, what):
    """Not only where archives download: a folder named by mistake would otherwise show only once the network fails."""
    (tmp_path / "a-file").write_text("")
    run = snakemake("-n", "--cores", "1", "--directory", str(tmp_path), "--config", f"download={{dir: {tmp_path / folder}}}")
    assert run.returncode != 0
    assert f"rnnmt: download.dir {tmp_path / folder} {what}; expected a folder of archives fetched by hand" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "results").exists()


MULTI30K_ARCHIVES = ROOT.parent / "shared" / "data" / "multi30k" / "task1-raw-gz"


@pytest.mark.skipif(not MULTI30K_ARCHIVES.is_dir(), reason=f"{MULTI30K_ARCHIVES} is absent: no real archive to fetch by hand")
def test_an_archive_fetched_from_another_folder_is_not_downloaded_again(tmp_path):
    """Where an archive comes from (download.dir, download.mirror) is not what it is: moving the folder, or a new
    mirror, must not run the download again, and with it every step after it."""
    folders = [tmp_path / "by-hand", tmp_path / "moved"]
    for folder in folders:
        folder.mkdir()
        (folder / "val.fr.gz").symlink_to(MULTI30K_ARCHIVES / "val.fr.gz")
    args = ("--cores", "1", "--directory", str(tmp_path / "work"), "results/data/archives/val.fr.gz", "--config", "scale=multi30k")
    first = snakemake(*args, f"download={{dir: {folders[0]}}}")
    assert first.returncode == 0, first.stderr[-3000:]
    assert json.loads((tmp_path / "work/results/data/archives/val.fr.gz.json").read_text())["source"] == "offline_dir"
    again = snakemake(*args, f"download={{dir: {folders[1]}, mirror: http://127.0.0.1:9/}}", "-n")
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, again.stdout + again.stderr


def test_a_yaml_syntax_error_in_config_yaml_names_file_and_line(tmp_path):
    import shutil

    shutil.copy(ROOT / "Snakefile", tmp_path)
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow")
    lines = (ROOT / "config.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.startswith("seed: 1"))
    lines[line - 1] = "seed: [1"
    (tmp_path / "config.yaml").write_text("\n".join(lines) + "\n")
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--directory", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    assert f"rnnmt: config file {tmp_path / 'config.yaml'} line {line + 1}, column" in run.stderr
    assert f"(while parsing a flow sequence at line {line})" in run.stderr and "Traceback" not in run.stderr


# A demo run's results/ folder (CI sets it after its demo): the end-to-end test checks that run instead of repeating it at
# tiny sizes.
DEMO_RESULTS = os.environ.get("RNNMT_DEMO_RESULTS")


@pytest.mark.integration
def test_the_demo_end_to_end_then_nothing_to_do(tmp_path):
    """The demo's tables, figures, claims and report, then nothing to do: of the run in RNNMT_DEMO_RESULTS, else of a
    tiny one here (tests/config/tiny.yaml: the demo's stages at smaller sizes)."""
    work = Path(DEMO_RESULTS).resolve().parent if DEMO_RESULTS else tmp_path
    args: tuple[str, ...] = ("--cores", "2", "--directory", str(work))
    if not DEMO_RESULTS:
        args += ("--configfile", str(ROOT / "tests" / "config" / "tiny.yaml"))
        run = snakemake(*args)
        assert run.returncode == 0, run.stderr[-3000:]
    results = work / "results"
    for name in (
        "tables/bahdanau2014_table1.md",
        "tables/bahdanau2014_table2.csv",
        "figures/bahdanau2014_fig2.png",
        "figures/bahdanau2014_fig3.png",
        "provenance.json",
        "models/rnnsearch-50/meta.json",
        "tables/luong2015_table1.md",
        "tables/luong2015_table4.csv",
        "figures/luong2015_fig5.png",
        "figures/luong2015_fig6.png",
        "figures/luong2015_fig7.png",
        "figures/learning_bahdanau2014_table1.png",
        "figures/learning_luong2015_table4.png",
        "translations/luong-global-dot-feed/test.unk.txt",
    ):
        assert (results / name).stat().st_size > 0, name
    meta = json.loads((results / "models/rnnsearch-50/meta.json").read_text())
    assert [row["update"] for row in read_metrics(results / "models/rnnsearch-50/metrics.jsonl")] == list(range(1, meta["updates"] + 1))
    assert (results / "data/unkdict/en-fr.tsv").exists()  # empty where the vocabularies keep every word (tiny)
    provenance = json.loads((results / "provenance.json").read_text())  # the demo's jobs ran in reproducible mode
    assert provenance["reproducible"]["on"] and provenance["reproducible"]["pins"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert "Synthetic demo data" in (results / "tables/bahdanau2014_table1.md").read_text()
    # One seed: today's table, without a spread, a Seeds column or per-seed columns.
    assert "±" not in (results / "tables/bahdanau2014_table1.md").read_text()
    assert (results / "tables/bahdanau2014_table1.csv").read_text().splitlines()[0] == (
        "System,BLEU All,BLEU No-UNK,sacreBLEU All (detok),sacreBLEU No-UNK (detok),published All,published No-UNK"
    )
    table4 = (results / "tables/luong2015_table4.md").read_text()
    assert "local-m (dot)" in table4 and "BLEU +unk" in table4 and "global (general)" not in table4  # the demo's subset
    again = snakemake(*args, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    claims = (results / "tables/claims.md").read_text()
    assert "RNNsearch-50 | RNNencdec-50" in claims and "95% interval" in claims
    coverage = (results / "tables/coverage.csv").read_text()
    assert "Table 6,not reproduced,no" in coverage and "Figure 6,reproduced,yes" in coverage
    report = snakemake("--directory", str(work), "--report", str(tmp_path / "report.html"))
    assert report.returncode == 0, report.stderr[-3000:]
    html = (tmp_path / "report.html").read_text()
    for name in (
        "bahdanau2014_table1.csv",
        "luong2015_table4.csv",
        "bahdanau2014_fig2.png",
        "luong2015_fig6.png",
        "luong2015_fig7.png",
        "learning_bahdanau2014_table1.png",
        "claims.csv",
        "coverage.csv",
    ):
        assert name in html, name


def _planned_outputs(stdout: str) -> set[str]:
    """Every output file a dry run lists."""
    return {out.strip() for line in stdout.splitlines() if line.strip().startswith("output:") for out in line.split(":", 1)[1].split(",")}


def test_dry_run_of_the_paper_scale_fetches_everything_both_papers_used(tmp_path):
    run = snakemake("-n", "--directory", str(tmp_path), "--config", "scale=paper")
    assert run.returncode == 0, run.stderr
    planned = _planned_outputs(run.stdout)
    table = sources.load()
    wmt = [key for key in table["archives"] if not key.startswith(("stanford", "lium"))]
    for key in wmt:
        assert f"results/data/archives/{sources.file_name(table, key)}" in planned, key
    expected = {
        "en-fr": ["europarl-v7", "commoncrawl", "un", "news-commentary-v9", "giga-fren", "newstest2012", "newstest2013", "newstest2014"],
        "en-de": ["europarl-v7", "commoncrawl", "news-commentary-v9", "newstest2013", "newstest2014-filtered", "newstest2015"],
    }
    for pair, names in expected.items():
        for name in names:
            assert f"results/data/raw/{pair}/{name}.json" in planned, (pair, name)
        assert f"results/data/raw/{pair}/report.json" in planned
    assert "results/data/extracted/giga-fren/giga-fren.release2.fixed.fr.gz" in planned
    assert "results/data/extracted/test-filtered/test/newstest2014-deen-ref.de.sgm" in planned
    assert "download_archive" in run.stdout and "rnnsearch-50star" in run.stdout
    # Axelrod selection by default: 40 scoring shards, no LIUM download.
    assert {f"results/data/selection/en-fr/scores/{k}.npz" for k in (0, 39)} <= planned
    assert "results/data/archives/bitexts.tgz" not in planned


def test_luong_table2_scores_the_ensemble_on_the_second_en_de_test_set(tmp_path):
    run = snakemake("-n", "-p", "--directory", str(tmp_path), "--config", "scale=paper")
    assert run.returncode == 0, run.stderr
    planned = _planned_outputs(run.stdout)
    second = "results/scores/test-newstest2015/luong-ensemble.unk.json"
    assert {"results/tables/luong2015_table2.md", second, "results/scores/test-newstest2015/luong-localp-general-feed.unk.json"} <= planned
    # The other tables keep the first test set (newstest2014 filtered) under the paths they always had.
    assert {"results/scores/luong-ensemble.unk.json", "results/translations/luong-ensemble/test.unk.txt"} <= planned
    commands = [line for line in run.stdout.splitlines() if line.startswith("Shell command: rnnmt ")]
    score = next(line for line in commands if f"--output {second}" in line)
    refs = "--refs-tok results/data/tok/en-de/test-newstest2015.de --refs-raw results/data/corpus/en-de/test-newstest2015.de"
    assert refs in score and "--hyps results/translations/luong-ensemble/test-newstest2015.unk.txt" in score
    assemble = next(line for line in commands if "--out-tgt results/data/corpus/en-de/test-newstest2015.de" in line)
    assert "--tgt results/data/raw/en-de/newstest2015.de" in assemble
    first = next(line for line in commands if "--out-tgt results/data/corpus/en-de/test.de" in line)
    assert "--tgt results/data/raw/en-de/newstest2014-filtered.de" in first


def _paper_plan_with(tmp_path: Path, override: str) -> set[str]:
    """The outputs a paper-scale dry run plans with `override` (YAML) merged onto config.yaml."""
    path = tmp_path / "override.yaml"
    path.write_text(override + "\n")
    run = snakemake("-n", "--directory", str(tmp_path), "--config", "scale=paper", "--configfile", str(ROOT / "config.yaml"), str(path))
    assert run.returncode == 0, run.stderr
    return _planned_outputs(run.stdout)


def test_lium_switch_trains_on_the_released_selection(tmp_path):
    planned = _paper_plan_with(tmp_path, "scales: {paper: {selection: {method: lium}}}")
    assert {"results/data/archives/bitexts.tgz", "results/data/tok/en-fr/preselected.fr"} <= planned
    assert not any("selection/en-fr/scores" in path for path in planned)


def test_stanford_switch_replaces_the_en_de_corpora(tmp_path):
    planned = _paper_plan_with(tmp_path, "scales: {paper: {corpora: {en-de: {set: stanford}}}}")
    assert {"results/data/archives/train.de", "results/data/raw/en-de/stanford-newstest2015.json"} <= planned
    assert "results/scores/test-stanford-newstest2015/luong-ensemble.unk.json" in planned  # Table 2 on Stanford's copy
    assert "results/data/raw/en-de/europarl-v7.json" not in planned


def test_unknown_corpus_name_stops_before_any_job(tmp_path):
    override = tmp_path / "typo.yaml"
    override.write_text("scales: {sample: {corpora: {en-fr: {train: [news-commentary-v8]}}}}\n")
    run = snakemake("-n", "--directory", str(tmp_path), "--config", "scale=sample", "--configfile", str(ROOT / "config.yaml"), str(override))
    assert run.returncode != 0
    assert "corpus 'news-commentary-v8' is not in the sources table" in run.stderr


# The README's example of a new scale: the whole change is this block (issue 14: at most 10 lines).
MID_SCALE = """\
scales:
  mid:
    base: sample
    description: the sample scale's data and systems with 768-unit recurrent layers
    model: {hidden: 768}
"""


def test_seeds_from_the_command_line_plan_a_run_per_seed(tmp_path):
    run = snakemake("-n", "--directory", str(tmp_path), "--config", "seeds=[1,2]")
    assert run.returncode == 0, run.stderr
    planned = _planned_outputs(run.stdout)
    assert {"results/models/rnnsearch-50/model.pt", "results/models/rnnsearch-50.seed2/model.pt"} <= planned


def test_a_new_scale_that_inherits_sample_plans_the_sample_run_with_its_change(tmp_path):
    assert len(MID_SCALE.splitlines()) <= 10
    override = tmp_path / "mid.yaml"
    override.write_text(MID_SCALE)
    run = snakemake("-n", "-p", "--directory", str(tmp_path), "--config", "scale=mid", "--configfile", str(ROOT / "config.yaml"), str(override))
    assert run.returncode == 0, run.stderr
    planned = _planned_outputs(run.stdout)
    assert {
        "results/models/rnnsearch-50/model.pt",
        "results/models/luong-global-dot-feed/model.pt",
        "results/tables/luong2015_table2.md",
        "results/data/raw/en-fr/newstest2014.json",
    } <= planned
    assert "results/models/rnnsearch-50star/model.pt" not in planned  # sample's systems: no RNNsearch-50*
    show = subprocess.run(
        [sys.executable, "-m", "rnnmt.cli", "show-system", "luong-global-dot-feed", "--scale", "mid", "--config", str(ROOT / "config.yaml"), str(override)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert show.returncode == 0, show.stderr
    assert '"hidden": 768' in show.stdout and '"layers": 2' in show.stdout  # mid's change over sample's Luong sizes


@pytest.mark.integration
def test_tiny_two_seeds_train_apart_and_tables_claims_show_the_spread(tmp_path):
    """Issue 15: with seeds [1, 2] each system trains twice; tables show mean ± sd, claims the two-level bootstrap."""
    override = tmp_path / "seeds.yaml"
    override.write_text("seeds: [1, 2]\nscales: {demo: {systems: [rnnencdec-50, rnnsearch-50]}}\n")
    args = ("--cores", "2", "--directory", str(tmp_path), "--configfile", str(ROOT / "tests" / "config" / "tiny.yaml"), str(override))
    run = snakemake(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results"
    for run_name in ("rnnsearch-50", "rnnsearch-50.seed2", "rnnencdec-50", "rnnencdec-50.seed2"):
        assert (results / "models" / run_name / "model.pt").stat().st_size > 0, run_name
    assert json.loads((results / "config/rnnsearch-50.seed2.json").read_text())["seed"] == 2
    rows = {r["System"]: r for r in csv.DictReader((results / "tables/bahdanau2014_table1.csv").open(encoding="utf-8"))}
    search = rows["RNNsearch-50"]
    per_seed = [float(search[f"BLEU All (seed {s})"]) for s in (1, 2)]
    mean, sd = statistics.mean(per_seed), statistics.stdev(per_seed)
    assert search["Seeds"] == "2" and float(search["BLEU All"]) == pytest.approx(mean, abs=0.006)
    md_row = next(line for line in (results / "tables/bahdanau2014_table1.md").read_text().splitlines() if line.startswith("| RNNsearch-50 |"))
    md_mean, md_sd = (float(x) for x in md_row.split(" | ")[1].split(" ± "))  # BLEU All, from the CSV's rounded seeds
    assert md_mean == pytest.approx(mean, abs=0.006) and md_sd == pytest.approx(sd, abs=0.011)
    claim = next(csv.DictReader((results / "tables/claims.csv").open(encoding="utf-8")))
    assert claim["seeds"] == "2/2"
    low, high = (float(x) for x in claim["95% interval"].strip("[]").split(", "))
    sentence_low, sentence_high = (float(x) for x in claim["sentence-only 95%"].strip("[]").split(", "))
    assert high - low >= sentence_high - sentence_low - 0.011  # both rounded to 2 decimals
    again = snakemake(*args, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.integration
def test_tiny_variant_trains_beside_its_baseline_and_is_compared_with_it(tmp_path):
    """A variant from a --configfile: its own model and results, the comparison table and figures; Table 1 unchanged."""
    override = tmp_path / "variant.yaml"
    override.write_text(
        "scales: {demo: {systems: [rnnsearch-50]}}\n"
        "variants: {rnnsearch-50-align32: {of: rnnsearch-50, label: RNNsearch-50 (align 32), model: {align_hidden: 32}}}\n"
    )
    args = ("--cores", "2", "--directory", str(tmp_path), "--configfile", str(ROOT / "tests" / "config" / "tiny.yaml"), str(override))
    run = snakemake(*args)
    assert run.returncode == 0, run.stderr[-3000:]
    results = tmp_path / "results"
    for name in ("rnnsearch-50", "rnnsearch-50-align32"):
        assert (results / "models" / name / "model.pt").stat().st_size > 0, name
    assert json.loads((results / "config/rnnsearch-50-align32.json").read_text())["model"]["align_hidden"] == 32
    assert json.loads((results / "config/rnnsearch-50.json").read_text())["model"]["align_hidden"] == 16
    table1 = [r["System"] for r in csv.DictReader((results / "tables/bahdanau2014_table1.csv").open(encoding="utf-8"))]
    assert table1 == ["RNNsearch-50", "Moses"]  # the paper's rows that run here, and no variant among them
    rows = list(csv.DictReader((results / "tables/variants.csv").open(encoding="utf-8")))
    assert [(r["System"], r["Compared with"]) for r in rows] == [("RNNsearch-50", "(the baseline)"), ("RNNsearch-50 (align 32)", "RNNsearch-50")]
    base, variant = rows
    assert float(variant["delta BLEU"]) == pytest.approx(float(variant["BLEU"]) - float(base["BLEU"]), abs=0.011)
    assert all(re.fullmatch(r"[01]\.\d{3}", variant[column]) for column in ("p (BLEU)", "p (sacreBLEU)")), variant
    meta = json.loads((results / "models/rnnsearch-50-align32/meta.json").read_text())
    assert float(variant["Dev ppl"]) == pytest.approx(meta["heldout_ppl"]["dev"], abs=0.006)
    for figure in ("variants_training", "variants_length"):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 0, figure
    again = snakemake(*args, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
