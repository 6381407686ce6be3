"""Corpus assembly: parallel checks before any output, whitespace cleaning, empty-pair dropping."""

from pathlib import Path

import pytest

from rnnmt.data.corpus import assemble, check_parallel
from rnnmt.fileio import iter_lines
from rnnmt.errors import UserError


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
    assert str(err.value) == (
        f"{bad_s} has 3 lines but {bad_t} has 2 lines; parallel files must have the same number of lines."
    )
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
