"""Tokenization matches sacremoses called directly, whatever the number of processes."""

import itertools
from pathlib import Path

import pytest
from sacremoses import MosesTokenizer

from rnnmt.errors import UserError
from rnnmt.text.tokenize import detokenize_lines, tokenize_file, tokenize_lines

NEWSTEST_FR = Path("/work/shared/data/wmt14/test/plain/newstest2014-fren.fr")

SENTENCES = [
    "L'homme a dit : « C'est l'heure ! »",
    "Le prix est de 3,5 millions d'euros (environ 4 millions de dollars).",
    "Il est passé à 160 km/h au-dessus du sanctuaire Monserrate.",
    '<b>Bold</b> & "quoted" text | pipes [brackets]',
    "",
    "M. Dupont vit aux États-Unis depuis 2010.",
]


def _direct(lines, lang, escape=True, aggressive=False):
    tok = MosesTokenizer(lang=lang)
    return [tok.tokenize(s, escape=escape, aggressive_dash_splits=aggressive, return_str=True) for s in lines]


@pytest.mark.parametrize("escape", [True, False])
@pytest.mark.parametrize("aggressive", [True, False])
def test_tokenize_lines_equals_sacremoses(escape, aggressive):
    got = tokenize_lines(SENTENCES, "fr", escape=escape, aggressive_dash_splits=aggressive)
    assert got == _direct(SENTENCES, "fr", escape, aggressive)


def test_apostrophe_is_escaped_and_split_like_tokenizer_perl():
    assert tokenize_lines(["l'homme"], "fr") == ["l&apos; homme"]
    assert tokenize_lines(["l'homme"], "fr", escape=False) == ["l' homme"]
    assert tokenize_lines(["it's"], "en") == ["it &apos;s"]


def test_file_output_identical_for_one_and_two_processes(tmp_path):
    lines = list(itertools.islice(itertools.cycle(SENTENCES), 50))
    src = tmp_path / "in.fr"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    n1 = tokenize_file(src, tmp_path / "p1", "fr", processes=1)
    # Small chunks so both workers get several chunks and ordering is really exercised.
    n2 = tokenize_file(src, tmp_path / "p2", "fr", processes=2, chunk_lines=3)
    assert n1 == n2 == 50
    p1 = (tmp_path / "p1").read_text(encoding="utf-8")
    assert p1 == (tmp_path / "p2").read_text(encoding="utf-8")
    assert p1.splitlines() == _direct(lines, "fr")


def test_bad_process_count_and_missing_input(tmp_path):
    with pytest.raises(UserError, match="at least 1"):
        tokenize_file(tmp_path / "x", tmp_path / "y", "en", processes=0)
    with pytest.raises(UserError, match="does not exist"):
        tokenize_file(tmp_path / "missing", tmp_path / "out", "en")
    assert not (tmp_path / "out").exists()
    assert list(tmp_path.iterdir()) == []


def test_detokenize_round_trip():
    raw = ['L\'homme a dit "oui".', "C'est fini, n'est-ce pas ?"]
    assert detokenize_lines(tokenize_lines(raw, "fr"), "fr") == raw
    assert detokenize_lines(["it &apos;s a &quot; test &quot; ."], "en") == ['it\'s a "test".']


@pytest.mark.skipif(not NEWSTEST_FR.exists(), reason=f"{NEWSTEST_FR} not present (shared WMT'14 test data)")
def test_newstest2014_first_200_lines_match_sacremoses(tmp_path):
    lines = NEWSTEST_FR.read_text(encoding="utf-8").split("\n")[:200]
    head = tmp_path / "nt14.head.fr"
    head.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "nt14.head.tok.fr"
    assert tokenize_file(head, out, "fr", processes=2, chunk_lines=64) == 200
    assert out.read_text(encoding="utf-8").splitlines() == _direct(lines, "fr")


def test_pretokenized_input_is_copied_unchanged(tmp_path):
    # Would change if tokenized: the apostrophe and the quote would be escaped and split.
    lines = ["l&apos; homme a dit &quot; oui &quot; .", 'it\'s "raw"', "", "a\u00a0b\r"]
    src = tmp_path / "in.de"
    src.write_text("\n".join(lines), encoding="utf-8")
    assert tokenize_file(src, tmp_path / "out", "de", processes=2, pretokenized=True) == 4
    # read_bytes: read_text would turn the "\r\n" into "\n" and hide a changed line.
    assert (tmp_path / "out").read_bytes() == ("\n".join(lines) + "\n").encode("utf-8")


def test_cli_tokenize_pretokenized(tmp_path, capsys):
    from rnnmt.cli import main

    src = tmp_path / "in.en"
    src.write_text("it 's &quot; done &quot;\n", encoding="utf-8")
    assert main(["tokenize", "--lang", "en", "--input", str(src), "--output", str(tmp_path / "out"), "--pretokenized"]) == 0
    assert (tmp_path / "out").read_text(encoding="utf-8") == "it 's &quot; done &quot;\n"
    assert "copied already tokenized 1 lines" in capsys.readouterr().err


def test_a_language_moses_has_no_rules_for_is_refused_unless_the_text_comes_tokenized(tmp_path):
    from rnnmt.text.tokenize import check_language, moses_languages

    assert {"en", "fr", "de", "cs", "mni"} <= moses_languages() and "xx" not in moses_languages()
    check_language("de", "pairs.de-en")
    with pytest.raises(
        UserError, match=r"pairs\.xx-en: Moses \(sacremoses\) has no tokenizer rules for language 'xx' \(it has as, bn, .*\); tokenize that text"
    ):
        check_language("xx", "pairs.xx-en")
    (tmp_path / "in.txt").write_text("Hello , world .\n")
    with pytest.raises(UserError, match=r"--lang: Moses \(sacremoses\) has no tokenizer rules for language 'xx'"):
        tokenize_file(tmp_path / "in.txt", tmp_path / "out.txt", "xx")
    assert tokenize_file(tmp_path / "in.txt", tmp_path / "out.txt", "xx", pretokenized=True) == 1


def test_multi30k_preprocessing_lowercases_then_normalises_then_tokenizes():
    """The order of multi30k/dataset's task1-tokenize.sh: lowercase.perl | normalize-punctuation.perl | tokenizer.perl."""
    line = "A Dog «runs»  in the PARK's grass."
    expected = MosesTokenizer(lang="en").tokenize('a dog "runs" in the park\'s grass.', escape=True, return_str=True)
    assert tokenize_lines([line], "en", lowercase=True, normalize_punctuation=True) == [expected]
    assert tokenize_lines([line], "en") != [expected]


MULTI30K = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"


@pytest.mark.skipif(not (MULTI30K / "tok").is_dir(), reason=f"{MULTI30K} not present (shared Multi30k data)")
@pytest.mark.parametrize("lang", ["en", "de", "fr"])
def test_multi30k_preprocessing_gives_the_tasks_own_tokenized_files(lang):
    """Our text equals the task's tok/ files (Moses 3a0631a's Perl scripts) on at least 99.5% of the lines of val and
    the two Flickr test sets (train in docs/multi30k.md: the same share)."""
    same = total = 0
    for split in ("val", "test_2016_flickr", "test_2017_flickr"):
        raw = (MULTI30K / "raw" / f"{split}.{lang}").read_text(encoding="utf-8").splitlines()
        task = (MULTI30K / "tok" / f"{split}.lc.norm.tok.{lang}").read_text(encoding="utf-8").splitlines()
        ours = tokenize_lines(raw, lang, lowercase=True, normalize_punctuation=True)
        same += sum(a == b for a, b in zip(ours, task, strict=True))
        total += len(task)
    assert same / total >= 0.995, f"{same} of {total} lines as the task's"
