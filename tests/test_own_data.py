"""Your own corpus (`data.source: files`, docs/own-data.md): the page's example config on German->English files,
planned, run end to end at tiny sizes, and each kind of bad input stopped with one line."""

from __future__ import annotations

import functools
import gzip
import hashlib
import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

from wmt_mirror import DEFAULT_SHARED, sentence

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "docs" / "examples" / "own-data.yaml"
TINY = ROOT / "tests" / "config" / "own-data-tiny.yaml"
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


def snakemake(directory: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, "--directory", str(directory), *args], cwd=ROOT, capture_output=True, text=True, timeout=1800)


def de_en_lines() -> dict[str, list[str]]:
    """German and English lines, translations of each other: WMT's newstest2012 and 2013 where ../shared has them,
    else generated sentences (tests/wmt_mirror.py)."""
    dev = DEFAULT_SHARED / "dev"
    if (dev / "newstest2012.de").exists():
        return {
            lang: [*(dev / f"newstest2012.{lang}").read_text().splitlines(), *(dev / f"newstest2013.{lang}").read_text().splitlines()] for lang in ("de", "en")
        }
    return {lang: [sentence(i, lang) for i in range(2600)] for lang in ("de", "en")}


def write_example_files(directory: Path) -> None:
    """The files docs/examples/own-data.yaml names, under `directory`: 2,000 training pairs (gzipped), 200 dev, 300 test."""
    lines, folder = de_en_lines(), directory / "data" / "de-en"
    folder.mkdir(parents=True)
    for lang, text in lines.items():
        (folder / f"train.{lang}.gz").write_bytes(gzip.compress("".join(f"{t}\n" for t in text[:2000]).encode()))
        (folder / f"dev.{lang}").write_text("".join(f"{t}\n" for t in text[2000:2200]))
        (folder / f"test.{lang}").write_text("".join(f"{t}\n" for t in text[2200:2500]))


def overlay(directory: Path, name: str, content: dict) -> str:
    path = directory / name
    path.write_text(yaml.safe_dump(content))
    return str(path)


def test_the_example_plans_every_stage_from_the_files_to_its_table(tmp_path):
    write_example_files(tmp_path)
    run = snakemake(tmp_path, "-n", "--configfile", str(EXAMPLE))
    assert run.returncode == 0, run.stderr[-3000:]
    for stage in ("download_archive", "assemble_raw", "tokenize", "build_vocab", "binarize", "train", "translate", "score", "table", "figure"):
        assert f"rule {stage}:" in run.stdout, stage
    assert "results/tables/own_de_en.md" in run.stdout and "results/figures/own_de_en_length.png" in run.stdout
    assert "input: " + str(tmp_path / "data/de-en/train.de.gz") in run.stdout  # a local file is the download's input
    assert "rnnsearch-50" not in run.stdout and "newstest" not in run.stdout  # nothing of the sample scale it inherits


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"scales": {"own-de-en": {"data": {"files": {"my-train": {"de": "data/de-en/nowhere.de"}}}}}},
            "rnnmt: data.files.my-train.de: data/de-en/nowhere.de does not exist (relative paths are read from {dir}); "
            "expected a text file, optionally gzipped (.gz), or a URL.",
        ),
        (
            {
                "pairs": {"xx-en": {"src": "xx", "tgt": "en"}},
                "scales": {
                    "own-de-en": {
                        "data": {"files": {f"xx-{split}": {"xx": f"data/de-en/{split}.de", "en": f"data/de-en/{split}.en"} for split in ("dev", "test")}},
                        "corpora": {"xx-en": {"train": ["xx-dev"], "dev": ["xx-dev"], "test": ["xx-test"]}},
                    }
                },
                "systems": {"own-rnnsearch": {"pair": "xx-en"}, "own-luong-global-dot-feed": {"pair": "xx-en"}},
                "tables": {"own_de_en": {"pair": "xx-en"}},
            },
            "rnnmt: pairs.xx-en: Moses (sacremoses) has no tokenizer rules for language 'xx'",
        ),
        (
            {"scales": {"own-de-en": {"data": {"files": {"my-train": {"de": "data/de-en"}, "my-dev": {"de": "data/dev.de", "en": "data/dev.en"}}}}}},
            "".join(
                f"rnnmt: data.files.{where}: {path} {what} (relative paths are read from {{dir}}); expected a text file, optionally gzipped (.gz), or a URL.\n"
                for where, path, what in (
                    ("my-train.de", "data/de-en", "is a directory"),
                    ("my-dev.de", "data/dev.de", "does not exist"),
                    ("my-dev.en", "data/dev.en", "does not exist"),
                )
            ),
        ),
    ],
    ids=["missing-file", "language-moses-lacks", "a-directory-and-every-missing-file"],
)
def test_a_mistake_in_the_files_stops_the_workflow_with_one_line(tmp_path, change, message):
    write_example_files(tmp_path)
    run = snakemake(tmp_path, "-n", "--configfile", str(EXAMPLE), overlay(tmp_path, "mistake.yaml", change))
    assert run.returncode != 0
    assert message.format(dir=tmp_path) in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "results").exists()


def test_a_bad_corpus_stops_its_job_with_one_line_and_no_output(tmp_path):
    """Dev sides of unequal length and an empty test set (lines with nothing on them): each corpus's assembly stops
    with one line in its log and leaves no raw corpus behind."""
    write_example_files(tmp_path)
    folder, raw = tmp_path / "data" / "de-en", tmp_path / "results" / "data" / "raw" / "de-en"
    (folder / "dev.en").write_text("".join(f"{i}\n" for i in range(199)))
    for lang in ("de", "en"):
        (folder / f"test.{lang}").write_text("\n\n")
    targets = ["results/data/raw/de-en/my-dev.json", "results/data/raw/de-en/my-test.json"]
    run = snakemake(tmp_path, *targets, "--cores", "2", "--keep-going", "--configfile", str(EXAMPLE))
    assert run.returncode != 0
    expected = {
        "my-dev": "results/data/archives/my-dev.de has 200 lines but results/data/archives/my-dev.en has 199 lines; "
        "parallel files must have the same number of lines.",
        "my-test": "my-test: results/data/archives/my-test.de, results/data/archives/my-test.en hold no sentence pair "
        "(2 lines, 2 with an empty side); expected at least one line with text on both sides.",
    }
    for corpus, message in expected.items():
        log = (tmp_path / "results" / "logs" / "assemble_raw" / f"de-en.{corpus}.log").read_text()
        assert [line for line in log.splitlines() if "error" in line] == [f"rnnmt raw-corpus: error: {message}"], log
        assert not any(raw.glob(f"{corpus}.*"))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.mark.integration
def test_the_example_runs_end_to_end_on_german_english_then_has_nothing_to_do(tmp_path):
    """docs/examples/own-data.yaml at tiny sizes, its test set from a URL with checksums: tables, figures, report."""
    write_example_files(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    for lang in ("de", "en"):
        (tmp_path / "data/de-en" / f"test.{lang}").rename(served / f"test.{lang}")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        sha256 = {lang: hashlib.sha256((served / f"test.{lang}").read_bytes()).hexdigest() for lang in ("de", "en")}
        from_url = {"scales": {"own-de-en": {"data": {"files": {"my-test": {"de": f"{url}/test.de", "en": f"{url}/test.en", "sha256": sha256}}}}}}
        args = ("--configfile", str(EXAMPLE), str(TINY), overlay(tmp_path, "url.yaml", from_url))
        run = snakemake(tmp_path, "--cores", "2", *args)
        assert run.returncode == 0, run.stderr[-3000:]
        again = snakemake(tmp_path, "-n", *args)
        assert "Nothing to be done" in again.stdout + again.stderr
        report = snakemake(tmp_path, *args, "--report", str(tmp_path / "report.html"))
        assert report.returncode == 0, report.stderr[-3000:]
    finally:
        server.shutdown()
    results = tmp_path / "results"
    record = json.loads((results / "data/archives/my-test.de.json").read_text())
    assert record["checksum_verified"] and record["source"] == "download" and record["sha256"] == sha256["de"]
    assert json.loads((results / "data/archives/my-train.de.gz.json").read_text())["source"] == "local_file"
    # Moses tokenized the German side with German rules (a comma is split off; the raw text has "word,").
    assert ", " in (results / "data/raw/de-en/my-train.de").read_text() or " ," in (results / "data/tok/de-en/pool.de").read_text()
    table = (results / "tables/own_de_en.csv").read_text().splitlines()
    assert table[0] == "System,BLEU,sacreBLEU (detok),Dev ppl,Test ppl"
    assert [row.split(",")[0] for row in table[1:]] == ["RNNsearch", "global (dot) + feed"]
    luong = table[2].split(",")
    assert all(float(value) >= 0 for value in luong[1:])  # the Luong recipe validates on test too: every column filled
    for figure in ("own_de_en_length.png", "own_de_en_training.png"):
        assert (results / "figures" / figure).stat().st_size > 0
    html = (tmp_path / "report.html").read_text()
    assert "own_de_en.csv" in html and "own_de_en_length.png" in html
