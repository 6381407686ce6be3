"""The sample scale's data stages against a local stand-in for statmt.org: download, verify, extract, assemble."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rnnmt.fileio import read_lines

import wmt_mirror

# A whole run of the data stages (about a minute): with the long tests.
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
SHARED = wmt_mirror.DEFAULT_SHARED if wmt_mirror.DEFAULT_SHARED.is_dir() else None
TARGETS = [f"results/data/corpus/en-fr/{split}.{lang}" for split in ("pool", "dev", "test") for lang in ("en", "fr")]
TARGETS += [
    "results/data/raw/en-fr/report.json",
    "results/data/raw/en-de/report.json",
    "results/data/corpus/en-de/test.de",
    "results/data/tok/en-de/test-newstest2015.de",
]


@pytest.fixture(scope="module")
def sample_data(tmp_path_factory):
    """Run the data stages of the sample scale once, with every archive fetched from the local mirror."""
    tmp = tmp_path_factory.mktemp("wmt")
    checksums = wmt_mirror.build_mirror(tmp / "mirror", SHARED)
    with wmt_mirror.serve(tmp / "mirror") as url:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "snakemake",
                "--snakefile",
                str(ROOT / "Snakefile"),
                "--cores",
                "2",
                "--directory",
                str(tmp / "work"),
                "--config",
                "scale=sample",
                f"download={{mirror: '{url}', checksums: '{checksums}'}}",
                "--",
                *TARGETS,
            ],
            capture_output=True,
            text=True,
            timeout=600,
            env={**os.environ, "no_proxy": "127.0.0.1", "NO_PROXY": "127.0.0.1"},
        )
    assert run.returncode == 0, run.stderr[-3000:]
    return tmp / "work" / "results"


def test_every_archive_was_downloaded_and_verified(sample_data):
    records = sorted((sample_data / "data" / "archives").glob("*.json"))
    assert [r.name for r in records] == ["dev.tgz.json", "test-filtered.tgz.json", "test-full.tgz.json", "test.tgz.json", "training-parallel-nc-v9.tgz.json"]
    for record in records:
        info = json.loads(record.read_text())
        assert info["checksum_verified"] and info["source"] == "download", record.name
    # Extracted members are intermediate: gone once the raw corpora exist.
    assert not list((sample_data / "data" / "extracted").rglob("*.sgm"))


def test_split_sizes(sample_data):
    corpus = sample_data / "data" / "corpus" / "en-fr"
    dev, test = (3003 + 3000, 3003) if SHARED else (2 * wmt_mirror.GENERATED_SEGMENTS, wmt_mirror.GENERATED_SEGMENTS)
    for lang in ("en", "fr"):
        assert len(read_lines(corpus / f"dev.{lang}")) == dev
        assert len(read_lines(corpus / f"test.{lang}")) == test
    assert len(read_lines(corpus / "pool.en")) == len(read_lines(corpus / "pool.fr")) > 0


@pytest.mark.skipif(SHARED is None, reason="../shared/data/wmt14 is absent: no real newstest2014 to compare with")
def test_test_set_text_equals_the_reference_plain_text(sample_data):
    for lang in ("en", "fr"):
        expected = read_lines(SHARED / "test" / "plain" / f"newstest2014-fren.{lang}")
        assert read_lines(sample_data / "data" / "raw" / "en-fr" / f"newstest2014.{lang}") == expected
        assert read_lines(sample_data / "data" / "corpus" / "en-fr" / f"test.{lang}") == expected


@pytest.mark.skipif(SHARED is None, reason="../shared/data/wmt14 is absent: the filtered set is built from it")
def test_en_de_filtered_test_set_has_2737_sentences(sample_data):
    report = json.loads((sample_data / "data" / "raw" / "en-de" / "report.json").read_text())
    assert report["corpora"]["newstest2014-filtered"]["pairs"] == 2737
    assert report["corpora"]["newstest2014-filtered"]["matches_expected"] is True
    assert report["corpora"]["newstest2013"]["pairs"] == 3000


def test_the_test_set_a_table_names_is_assembled_beside_the_first(sample_data):
    """Luong's Table 2 names En-De newstest2015, the pair's second test set; `test` stays the first."""
    corpus, raw = sample_data / "data" / "corpus" / "en-de", sample_data / "data" / "raw" / "en-de"
    assert read_lines(corpus / "test-newstest2015.de") == read_lines(raw / "newstest2015.de")
    assert read_lines(corpus / "test.de") == read_lines(raw / "newstest2014-filtered.de")
    assert len(read_lines(sample_data / "data" / "tok" / "en-de" / "test-newstest2015.de")) == len(read_lines(raw / "newstest2015.de"))


def test_report_counts_repairs_and_flags_sizes_unlike_the_release(sample_data):
    report = json.loads((sample_data / "data" / "raw" / "en-fr" / "report.json").read_text())
    nc = report["corpora"]["news-commentary-v9"]
    assert nc["repaired_utf8"] == {"src": 1, "tgt": 0}
    assert "\ufffd" in (sample_data / "data" / "raw" / "en-fr" / "news-commentary-v9.en").read_text()
    # The mirror's News Commentary is a 5k sample, not the 183,251 lines of the release: a warning, not an error.
    assert nc["matches_expected"] is False and "news-commentary-v9" in report["mismatches"]
    assert nc["words"]["src"] > 0 and nc["pairs"] == nc["lines"] - nc["dropped_empty"]
