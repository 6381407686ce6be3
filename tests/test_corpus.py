"""Corpus assembly: raw per-corpus files with their reports, parallel checks before any output,
whitespace cleaning, empty-pair dropping."""

import gzip
from pathlib import Path

import pytest

from rnnmt.data.corpus import assemble, assemble_raw, check_parallel, clean, is_empty, merge_reports
from rnnmt.errors import UserError
from rnnmt.fileio import iter_lines


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode("utf-8"))
    return path


def test_assemble_concatenates_in_order_and_cleans(tmp_path):
    s1 = _write(tmp_path / "a.en", "  Hello   world \n\t\nA\u00a0:\u00a0b\n")
    t1 = _write(tmp_path / "a.fr", "Bonjour\tle monde\nrien\n\u00a0\n")
    s2 = _write(tmp_path / "b.en", "line\r\nnext\u2028part")
    t2 = _write(tmp_path / "b.fr", "ligne\nsuite")
    stats = assemble([s1, s2], [t1, t2], tmp_path / "out.en", tmp_path / "out.fr")

    # U+00A0 survives for the tokenizer; "\r" and U+2028 would otherwise break line alignment.
    assert (tmp_path / "out.en").read_text(encoding="utf-8") == "Hello world\nline\nnext part\n"
    assert (tmp_path / "out.fr").read_text(encoding="utf-8") == "Bonjour le monde\nligne\nsuite\n"
    assert stats["pairs_in"] == 5
    assert stats["pairs_out"] == 3
    assert stats["dropped_empty"] == 2
    per_input = [(i["pairs_in"], i["pairs_out"], i["dropped_empty"]) for i in stats["inputs"]]
    assert per_input == [(3, 1, 2), (2, 2, 0)]
    assert stats["inputs"][1]["src"] == str(s2)


def test_no_break_space_kept_inside_text(tmp_path):
    src = _write(tmp_path / "s", "Quoi\u00a0?\n")
    tgt = _write(tmp_path / "t", "What?\n")
    assemble([src], [tgt], tmp_path / "o.s", tmp_path / "o.t")
    assert (tmp_path / "o.s").read_text(encoding="utf-8") == "Quoi\u00a0?\n"


def test_mismatch_names_both_files_and_counts_and_writes_nothing(tmp_path):
    good_s = _write(tmp_path / "good.en", "a\nb\n")
    good_t = _write(tmp_path / "good.fr", "x\ny\n")
    bad_s = _write(tmp_path / "bad.en", "a\nb\nc\n")
    bad_t = _write(tmp_path / "bad.fr", "x\ny")
    out_dir = tmp_path / "out"
    with pytest.raises(UserError) as err:
        assemble([good_s, bad_s], [good_t, bad_t], out_dir / "c.en", out_dir / "c.fr")
    assert str(err.value) == (f"{bad_s} has 3 lines but {bad_t} has 2 lines; parallel files must have the same number of lines.")
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_check_parallel_counts_a_final_line_without_newline(tmp_path):
    src = _write(tmp_path / "s", "a\nb")
    tgt = _write(tmp_path / "t", "x\ny\n")
    assert check_parallel(src, tgt) == 2
    assert check_parallel(_write(tmp_path / "e1", ""), _write(tmp_path / "e2", "")) == 0


def test_missing_input_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="missing.en does not exist"):
        check_parallel(tmp_path / "missing.en", _write(tmp_path / "t", "x\n"))


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(UserError, match=r"bad.txt line 2 is not valid UTF-8"):
        list(iter_lines(path))


# --- assemble_raw and merge_reports -------------------------------------------------------------


def _raw(tmp_path: Path, src: list[Path], tgt: list[Path], **kwargs) -> dict:
    """assemble_raw into tmp_path/out/raw.{src,tgt} as a training corpus named "c" unless told otherwise."""
    kwargs = {"name": "c", "heldout": False, **kwargs}
    return assemble_raw(src, tgt, tmp_path / "out" / "raw.src", tmp_path / "out" / "raw.tgt", **kwargs)


def _outputs(tmp_path: Path) -> tuple[bytes, bytes]:
    return (tmp_path / "out" / "raw.src").read_bytes(), (tmp_path / "out" / "raw.tgt").read_bytes()


def _nothing_written(tmp_path: Path) -> bool:
    """No output, not even a temporary file, is left in the output folder."""
    out = tmp_path / "out"
    return not out.exists() or not any(out.iterdir())


def _gz(path: Path, data: bytes) -> Path:
    with gzip.open(path, "wb") as f:
        f.write(data)
    return path


def test_raw_concatenates_pairs_in_order_including_gzip(tmp_path):
    s1 = _write(tmp_path / "a.en", "one\ntwo\r\n")
    t1 = _write(tmp_path / "a.fr", "un\ndeux\r\n")
    s2 = _gz(tmp_path / "b.en.gz", b"three  words here\nfour")
    t2 = _gz(tmp_path / "b.fr.gz", b"trois\nquatre\n")
    report = _raw(tmp_path, [s1, s2], [t1, t2])

    # Line content is kept as is ("\r", double spaces): later stages clean whitespace.
    assert _outputs(tmp_path) == (b"one\ntwo\r\nthree  words here\nfour\n", b"un\ndeux\r\ntrois\nquatre\n")
    assert report == {
        "corpus": "c",
        "heldout": False,
        "format": "text",
        "files": {"src": [str(s1), str(s2)], "tgt": [str(t1), str(t2)]},
        "lines": 4,
        "pairs": 4,
        "dropped_empty": 0,
        "repaired_utf8": {"src": 0, "tgt": 0},
        "words": {"src": 6, "tgt": 4},
        "expected_lines": None,
        "matches_expected": None,
    }


def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path):
    """Issue 11, defect 8: a BOM at the start of a test set became a token of line 1 of source and reference."""
    bom = b"\xef\xbb\xbf"
    s1 = tmp_path / "a.en"
    s1.write_bytes(bom + b"one\ntwo\n")
    t1 = _gz(tmp_path / "a.fr.gz", bom + b"un\ndeux\n")
    s2, t2 = tmp_path / "b.en", tmp_path / "b.fr"
    s2.write_bytes(bom + b"three\n")
    t2.write_bytes(b"trois\n")
    report = _raw(tmp_path, [s1, s2], [t1, t2], heldout=True)
    assert _outputs(tmp_path) == (b"one\ntwo\nthree\n", b"un\ndeux\ntrois\n")
    assert report["words"] == {"src": 3, "tgt": 3}
    assert list(iter_lines(s1)) == ["one", "two"]


def test_raw_repairs_invalid_utf8_in_training_text_and_counts_it(tmp_path):
    src = _write(tmp_path / "s.en", "ok\nfine\n")
    tgt = tmp_path / "t.fr"
    tgt.write_bytes(b"bon\nmal \xe9crit\n")
    report = _raw(tmp_path, [src], [tgt])
    assert _outputs(tmp_path)[1].decode("utf-8") == "bon\nmal \ufffdcrit\n"
    assert report["repaired_utf8"] == {"src": 0, "tgt": 1}
    assert report["pairs"] == 2


def test_raw_refuses_invalid_utf8_in_a_heldout_set_and_writes_nothing(tmp_path):
    src = _write(tmp_path / "s.en", "ok\nfine\n")
    tgt = tmp_path / "t.fr"
    tgt.write_bytes(b"bon\nmal \xe9crit\n")
    with pytest.raises(UserError, match=r"t\.fr line 2 is not valid UTF-8; dev and test sets must be"):
        _raw(tmp_path, [src], [tgt], heldout=True)
    assert _nothing_written(tmp_path)


def test_raw_line_count_mismatch_names_both_files_and_counts_and_writes_nothing(tmp_path):
    good_s = _write(tmp_path / "good.en", "a\nb\n")
    good_t = _write(tmp_path / "good.fr", "x\ny\n")
    bad_s = _write(tmp_path / "bad.en", "a\nb\n")
    bad_t = _gz(tmp_path / "bad.fr.gz", b"x\ny\nz\nw")
    with pytest.raises(UserError) as err:
        _raw(tmp_path, [good_s, bad_s], [good_t, bad_t])
    assert str(err.value) == (f"{bad_s} has 2 lines but {bad_t} has 4 lines; parallel files must have the same number of lines.")
    assert _nothing_written(tmp_path)
    # The longer file on the source side: every line of it is counted, none lost to the pairing.
    with pytest.raises(UserError, match=r"bad\.fr\.gz has 4 lines but .*bad\.en has 2 lines"):
        _raw(tmp_path, [bad_t], [bad_s])
    assert _nothing_written(tmp_path)


def test_raw_drops_pairs_with_an_empty_side_and_counts_words(tmp_path):
    # U+00A0 and U+2028 alone are empty after clean(); "\r" alone too.
    src = _write(tmp_path / "s.en", "a b c\n\nkept  here\n\u00a0\nx\n")
    tgt = _write(tmp_path / "t.fr", "d e\nvide\nici\nrien\n\r\n")
    report = _raw(tmp_path, [src], [tgt])
    assert _outputs(tmp_path) == (b"a b c\nkept  here\n", b"d e\nici\n")
    assert (report["lines"], report["pairs"], report["dropped_empty"]) == (5, 2, 3)
    assert report["words"] == {"src": 5, "tgt": 3}


def test_empty_check_without_clean_agrees_with_clean():
    """assemble_raw skips clean() for speed: is_empty must give the same answer on uncleaned text."""
    samples = ["", " ", "\r", "\t\u2028", "\u00a0", "\u202f \u2007", "a", " a ", "\u00a0:\u00a0", "\x1c", "\ufeff"]
    assert [is_empty(s) for s in samples] == [is_empty(clean(s)) for s in samples]


def test_raw_expected_lines_mismatch_is_a_warning(tmp_path, capsys):
    src = _write(tmp_path / "s.en", "a\nb\n")
    tgt = _write(tmp_path / "t.fr", "x\ny\n")
    report = _raw(tmp_path, [src], [tgt], name="europarl-v7", expected_lines=3)
    assert (report["expected_lines"], report["matches_expected"]) == (3, False)
    err = capsys.readouterr().err
    assert err.startswith("warning: europarl-v7: 2 lines, expected 3 (the sources table's `lines`); ")
    assert len(err.splitlines()) == 1
    assert _raw(tmp_path, [src], [tgt], expected_lines=2)["matches_expected"] is True
    assert capsys.readouterr().err == ""


def test_raw_sgm_format_reads_segments(tmp_path):
    def sgm(segments: list[str]) -> str:
        segs = "".join(f'<seg id="{i}">{s}</seg>\n' for i, s in enumerate(segments, start=1))
        return f'<srcset setid="t" srclang="any">\n<doc docid="d">\n{segs}</doc>\n</srcset>\n'

    src = _write(tmp_path / "src.en.sgm", sgm(["  Hello   world ", "Tom &amp; Jerry"]))
    tgt = _write(tmp_path / "ref.fr.sgm", sgm(["Bonjour le monde", "Tom &amp; Jerry"]))
    report = _raw(tmp_path, [src], [tgt], name="newstest2014", heldout=True, fmt="sgm", expected_lines=2)
    assert _outputs(tmp_path) == (b"Hello world\nTom &amp; Jerry\n", b"Bonjour le monde\nTom &amp; Jerry\n")
    assert (report["format"], report["lines"], report["pairs"], report["matches_expected"]) == ("sgm", 2, 2, True)


def test_raw_bad_arguments_and_corrupt_gzip_are_user_errors(tmp_path):
    src = _write(tmp_path / "s.en", "a\n")
    with pytest.raises(UserError, match="unknown corpus format 'xml'"):
        _raw(tmp_path, [src], [src], fmt="xml")
    with pytest.raises(UserError, match="got 1 source and 0 target files"):
        _raw(tmp_path, [src], [])
    truncated = tmp_path / "t.fr.gz"
    truncated.write_bytes(_gz(tmp_path / "full.gz", b"x\n" * 1000).read_bytes()[:-12])
    with pytest.raises(UserError, match=r"t\.fr\.gz is truncated or not a valid gzip file"):
        _raw(tmp_path, [src], [truncated])
    with pytest.raises(UserError, match=r"missing\.fr does not exist"):
        _raw(tmp_path, [src], [tmp_path / "missing.fr"])
    assert _nothing_written(tmp_path)


def _report(name: str, pairs: int, matches: bool | None, repaired: tuple[int, int] = (0, 0), dropped: int = 0) -> dict:
    return {
        "corpus": name,
        "pairs": pairs,
        "lines": pairs + dropped,
        "dropped_empty": dropped,
        "repaired_utf8": {"src": repaired[0], "tgt": repaired[1]},
        "expected_lines": None if matches is None else 99,
        "matches_expected": matches,
    }


def test_merge_reports_totals_and_mismatches():
    reports = [_report("europarl-v7", 10, True, (1, 2), 3), _report("un", 5, False, (0, 4)), _report("giga", 7, None, dropped=1)]
    summary = merge_reports(reports, "fr-en")
    assert summary == {
        "pair": "fr-en",
        "corpora": {"europarl-v7": reports[0], "un": reports[1], "giga": reports[2]},
        "total_pairs": 22,
        "mismatches": ["un"],
        "repaired_utf8": 7,
        "dropped_empty": 4,
    }
    with pytest.raises(UserError, match="two reports are for corpus 'un'"):
        merge_reports([reports[1], reports[1]], "fr-en")


def test_a_corpus_without_a_sentence_pair_is_refused_and_nothing_is_written(tmp_path):
    """An empty test set (or lines empty on one side) stops assembly with one line naming the files."""
    src, tgt = _write(tmp_path / "t.de", "\n \n"), _write(tmp_path / "t.en", "text\n\n")
    with pytest.raises(UserError, match=r"my-test: .*t\.de, .*t\.en hold no sentence pair \(2 lines, 2 with an empty side\); expected at least one line"):
        _raw(tmp_path, [src], [tgt], name="my-test", heldout=True)
    assert _nothing_written(tmp_path)
