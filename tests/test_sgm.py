"""SGM extraction: sacrebleu's rule, strict UTF-8, and agreement with the real WMT14 files."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rnnmt.data.sgm import read_sgm, sgm_to_text
from rnnmt.errors import UserError
from rnnmt.fileio import read_lines

WMT14 = Path(__file__).resolve().parents[2] / "shared" / "data" / "wmt14"
needs_wmt14 = pytest.mark.skipif(not WMT14.is_dir(), reason=f"real WMT14 SGM files not found at {WMT14}")

SMALL_SGM = (
    '<srcset setid="newstest2014" srclang="any">\n'
    '<doc sysid="ref" docid="1012-bbc" genre="news" origlang="en">\n'
    "<p>\n"
    '<seg id="1">  Hello \t  world  </seg>\n'
    '<seg id="2">Tom &amp; Jerry\u00a0: « ok »</seg>\r\n'
    '<seg id="3"></seg>\n'
    "</p>\n"
    "  <hl>not a segment</hl>\n"
    '<seg id="4">a\u2028b</seg>\n'
    "</doc>\n"
    "</srcset>\n"
)


def test_small_sgm_follows_sacrebleu_rule(tmp_path):
    path = tmp_path / "small.sgm"
    path.write_bytes(SMALL_SGM.encode("utf-8"))
    # Entities stay escaped and every Unicode whitespace run becomes one space, as in sacrebleu.
    expected = ["Hello world", "Tom &amp; Jerry : « ok »", "", "a b"]
    assert read_sgm(path) == expected
    assert sgm_to_text(path, tmp_path / "small.txt") == 4
    assert read_lines(tmp_path / "small.txt") == expected


def test_matches_sacrebleu_fake_sgml_conversion(tmp_path):
    fake_sgml = pytest.importorskip("sacrebleu.dataset.fake_sgml")
    path = tmp_path / "small.sgm"
    path.write_bytes(SMALL_SGM.encode("utf-8"))
    out = tmp_path / "sacrebleu.txt"
    # An instance without __init__ (which wants download metadata) is enough for the conversion.
    dataset = fake_sgml.FakeSGMLDataset.__new__(fake_sgml.FakeSGMLDataset)
    dataset._convert_format(str(path), str(out))
    assert read_sgm(path) == out.read_text(encoding="utf-8").split("\n")[:-1]


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "bad.sgm"
    path.write_bytes(b'<doc docid="x">\n<seg id="1">ok</seg>\n<seg id="2">caf\xe9</seg>\n</doc>\n')
    with pytest.raises(UserError, match=r"bad\.sgm line 3 .*UTF-8"):
        read_sgm(path)


def test_file_without_segments_refused(tmp_path):
    path = tmp_path / "plain.en"
    path.write_text("just text\n", encoding="utf-8")
    with pytest.raises(UserError, match="no '<seg"):
        sgm_to_text(path, tmp_path / "out.txt")
    assert not (tmp_path / "out.txt").exists()


@needs_wmt14
@pytest.mark.parametrize("sgm,plain", [("newstest2014-fren-src.en.sgm", "newstest2014-fren.en"), ("newstest2014-fren-ref.fr.sgm", "newstest2014-fren.fr")])
def test_newstest2014_equals_plain_text(tmp_path, sgm, plain):
    expected = read_lines(WMT14 / "test" / "plain" / plain)
    assert len(expected) == 3003
    assert read_sgm(WMT14 / "test" / sgm) == expected
    out = tmp_path / plain
    assert sgm_to_text(WMT14 / "test" / sgm, out) == 3003
    assert out.read_bytes() == (WMT14 / "test" / "plain" / plain).read_bytes()


@needs_wmt14
@pytest.mark.parametrize("year,n", [(2012, 3003), (2013, 3000)])
@pytest.mark.parametrize("side", ["src.en", "ref.fr"])
def test_dev_sets_line_counts_and_plain_text(year, n, side):
    segments = read_sgm(WMT14 / "dev" / f"newstest{year}-{side}.sgm")
    assert len(segments) == n
    # The released plain files keep no-break and hair spaces that sacrebleu's rule collapses.
    plain = read_lines(WMT14 / "dev" / f"newstest{year}.{side[-2:]}")
    assert segments == [re.sub(r"\s+", " ", line.strip()) for line in plain]
