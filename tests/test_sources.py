"""The sources table: every archive and corpus of both papers, and how config names resolve in it."""

from __future__ import annotations

import hashlib
import urllib.parse
from pathlib import Path

import pytest

from rnnmt.data import sources
from rnnmt.data.download import Checksum
from rnnmt.errors import UserError


@pytest.fixture(scope="module")
def table():
    return sources.load()


def test_every_corpus_resolves_for_each_of_its_pairs(table):
    for name, spec in table["corpora"].items():
        for key in spec["pairs"]:
            other, en = key.split("-")
            corpus = sources.corpus(table, name, en, other)
            assert corpus.src and len(corpus.src) == len(corpus.tgt), name


def test_training_line_counts_add_up_to_the_published_totals(table):
    """wmt14-sources.md §2: 40,842,333 fr-en and 4,520,620 de-en lines over the WMT'14 training corpora."""
    wmt14_train = ("europarl-v7", "commoncrawl", "un", "news-commentary-v9", "giga-fren")
    for pair, total in (("fr", 40_842_333), ("de", 4_520_620)):
        counts = [sources.corpus(table, n, "en", pair).lines for n in wmt14_train if f"{pair}-en" in table["corpora"][n]["pairs"]]
        assert sum(counts) == total


@pytest.mark.parametrize(
    "name, lang, lines",
    [
        ("newstest2012", "fr", 3003),
        ("newstest2013", "fr", 3000),
        ("newstest2014", "fr", 3003),
        ("newstest2013", "de", 3000),
        ("newstest2014-filtered", "de", 2737),
        ("newstest2015", "de", 2169),
    ],
)
def test_heldout_sets_are_sgm_with_the_papers_sizes(table, name, lang, lines):
    corpus = sources.corpus(table, name, "en", lang)
    assert corpus.heldout and corpus.format == "sgm" and corpus.lines == lines


def test_checksum_prefers_sha256_then_md5_then_none(table):
    assert sources.checksum(table, "europarl-v7") == Checksum("sha256", "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7")
    assert sources.checksum(table, "test-full") == Checksum("md5", "a8cd784e006feb32ac6f3d9ec7eb389a")
    assert sources.checksum(table, "lium-bitexts") is None


def test_file_names_are_unique_because_download_dir_is_searched_by_name(table):
    names = [sources.file_name(table, key) for key in table["archives"]]
    assert len(set(names)) == len(names)
    assert sources.file_name(table, "giga-fren") == "training-giga-fren.tar"


def test_plain_files_and_member_lists(table):
    stanford = sources.corpus(table, "stanford-train", "en", "de")
    assert stanford.tokenized and stanford.src == (sources.Part("stanford-train-en", None),)
    lium = sources.corpus(table, "lium-selected", "en", "fr")
    assert [p.member for p in lium.src][:2] == ["bitexts.selected/ep7_pc45.en.gz", "bitexts.selected/nc9.en.gz"]


def test_unknown_corpus_and_missing_pair(table):
    with pytest.raises(UserError, match="corpus 'europarl' is not in the sources table"):
        sources.corpus(table, "europarl", "en", "fr")
    with pytest.raises(UserError, match="corpus 'un' has no en-de data"):
        sources.corpus(table, "un", "en", "de")


def test_a_set_replaces_the_lists(table):
    splits = sources.pair_splits(table, {"set": "stanford", "train": ["europarl-v7"]}, "en", "de")
    assert splits == {"train": ["stanford-train"], "indomain": [], "dev": ["stanford-newstest2013"], "test": ["stanford-newstest2014", "stanford-newstest2015"]}
    assert sources.pair_splits(table, {"train": ["a"], "dev": ["b"], "test": ["c"]}, "en", "fr")["indomain"] == []
    with pytest.raises(UserError, match="corpus set 'stanford' has no en-fr corpora"):
        sources.pair_splits(table, {"set": "stanford"}, "en", "fr")


def test_preselected_corpus_of_lium(table):
    assert sources.preselected(table, "lium", "en", "fr") == "lium-selected"
    assert sources.preselected(table, "none", "en", "fr") is None
    with pytest.raises(UserError, match="no pre-selected corpus for en-de"):
        sources.preselected(table, "lium", "en", "de")


def test_checksum_override_replaces_published_values(tmp_path):
    override = tmp_path / "checksums.yaml"
    override.write_text("dev: {sha256: " + "ab" * 32 + ", bytes: 12}\n")
    table = sources.load(checksums=str(override))
    assert sources.checksum(table, "dev") == Checksum("sha256", "ab" * 32)
    assert table["archives"]["dev"]["bytes"] == 12
    override.write_text("nope: {md5: " + "ab" * 16 + "}\n")
    with pytest.raises(UserError, match="archive 'nope' is not in the sources table"):
        sources.load(checksums=str(override))
    override.write_text("dev: {bytes: 3}\n")
    with pytest.raises(UserError, match="needs a sha256 or md5"):
        sources.load(checksums=str(override))


def test_a_checksum_override_that_is_not_a_file_says_what_it_is(tmp_path):
    with pytest.raises(UserError, match=f"checksum override {tmp_path / 'nowhere.yaml'} does not exist; expected a YAML file"):
        sources.load(checksums=str(tmp_path / "nowhere.yaml"))
    with pytest.raises(UserError, match=f"checksum override {tmp_path} is a directory; expected a YAML file"):
        sources.load(checksums=str(tmp_path))


def test_table_by_path_and_missing_table(tmp_path):
    with pytest.raises(UserError, match="neither a table shipped with rnnmt"):
        sources.load(str(tmp_path / "missing.yaml"))
    (tmp_path / "t.yaml").write_text("archives: {}\n")
    with pytest.raises(UserError, match="has no 'corpora' mapping"):
        sources.load(str(tmp_path / "t.yaml"))


def test_own_files_become_a_table_of_archives_and_corpora(tmp_path):
    """data.files: each language's file is an archive named after its corpus (a path as a file:// URL, a URL as it is),
    dev and test corpora refuse invalid UTF-8, and a corpus resolves for its pair in either direction."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "train.de.gz").write_bytes(b"")
    (tmp_path / "d" / "train.en.gz").write_bytes(b"")
    files = {
        "my-train": {"de": "d/train.de.gz", "en": "d/train.en.gz"},
        "my-test": {"de": "https://example.org/t.de", "en": "https://example.org/t.en", "sha256": {"de": "a" * 64}, "tokenized": True},
    }
    table = sources.files_table(files, {"my-test"}, tmp_path)
    assert table["archives"]["my-train.de"] == {"url": (tmp_path / "d" / "train.de.gz").as_uri(), "file": "my-train.de.gz"}
    assert table["archives"]["my-test.de"] == {"url": "https://example.org/t.de", "file": "my-test.de", "sha256": "a" * 64}
    assert sources.file_name(table, "my-test.en") == "my-test.en" and sources.checksum(table, "my-test.en") is None
    train, test = sources.corpus(table, "my-train", "en", "de"), sources.corpus(table, "my-test", "de", "en")
    assert train.src == (sources.Part("my-train.en", None),) and not train.heldout and not train.tokenized
    assert test.heldout and test.tokenized
    with pytest.raises(UserError, match=r"corpus 'my-dev' is not in data\.files \(known: my-test, my-train\)"):
        sources.corpus(table, "my-dev", "de", "en")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"de": "d/none.de", "en": "d/none.en"}, r"data\.files\.c\.de: d/none\.de does not exist \(relative paths are read from .*\); expected a text file"),
        ({"de": "https://x/a"}, r"data\.files\.c: expected the files of two languages \(e\.g\. de: train\.de\.gz, en: train\.en\.gz\), got de\."),
        (
            {"de": "https://x/a", "en": "https://x/b", "sha256": {"fr": "a" * 64}},
            r"data\.files\.c\.sha256: fr is not one of the corpus's languages \(de, en\)\.",
        ),
    ],
)
def test_a_mistake_in_own_files_is_one_line(tmp_path, entry, message):
    with pytest.raises(UserError, match=message):
        sources.files_table({"c": entry}, set(), tmp_path)


def test_every_unreadable_own_file_is_a_line_of_one_error(tmp_path):
    """All at once, each as what it is: missing (a path or a file:// URL), or a directory where a file belongs."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.en").write_text("a\n")
    files = {
        "a": {"de": "d", "en": "d/a.en"},
        "b": {"de": "d/b.de", "en": (tmp_path / "d" / "b.en").as_uri(), "sha256": {"de": "a" * 64}},
        "c": {"de": "https://example.org/c.de", "en": "https://example.org/c.en"},
    }
    with pytest.raises(UserError) as error:
        sources.files_table(files, set(), tmp_path)
    expected = f"(relative paths are read from {tmp_path}); expected a text file, optionally gzipped (.gz), or a URL."
    assert str(error.value).splitlines() == [
        f"data.files.a.de: d is a directory {expected}",
        f"data.files.b.de: d/b.de does not exist {expected}",
        f"data.files.b.en: {(tmp_path / 'd' / 'b.en').as_uri()} does not exist {expected}",
    ]


MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


def test_the_multi30k_table_names_the_datasets_files_at_one_commit_with_their_line_counts():
    """Every file of task 1 (en, de, fr) at the fixed commit, every corpus for en-de and en-fr, with the dataset README's
    line counts."""
    table = sources.load("multi30k")
    assert {urllib.parse.urlsplit(a["url"]).path.split("/")[3] for a in table["archives"].values()} == {"a3d2e0d26b56f3846f66a952536ffed4e401d05a"}
    lines = {"train": 29000, "val": 1014, "test_2016_flickr": 1000, "test_2017_flickr": 1000, "test_2017_mscoco": 461}
    for name, expected in lines.items():
        for tgt in ("de", "fr"):
            corpus = sources.corpus(table, name, "en", tgt)
            assert corpus.lines == expected and corpus.heldout == (name != "train") and not corpus.tokenized
            assert [p.archive for p in corpus.src + corpus.tgt] == [f"{name}.en", f"{name}.{tgt}"]


@pytest.mark.skipif(not (MULTI30K / "task1-raw-gz").is_dir(), reason=f"{MULTI30K} not present (shared Multi30k data)")
def test_the_multi30k_checksums_are_those_of_the_datasets_files():
    table = sources.load("multi30k")
    for key, archive in table["archives"].items():
        data = (MULTI30K / "task1-raw-gz" / sources.file_name(table, key)).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (archive["sha256"], archive["bytes"]), key
