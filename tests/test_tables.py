"""score_system on files, Table 1 / Table 2 and Luong table rendering, and the demo's attention check."""

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from rnnmt.errors import UserError
from rnnmt.evaluate.report import table_command
from rnnmt.evaluate.score import score_system
from rnnmt.evaluate.tables import DEMO_BANNER, TABLE_KINDS, attention_check, bleu_table, learning_table, luong_table, nist_table, systems_table, write_table

SIGNATURE = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


@pytest.fixture
def system_files(tmp_path):
    src = ["a short one here .", "this source sentence is much longer than the other two ones here .", "short too ."]
    refs_tok = ["un court ici .", "cette phrase l&apos; est bien plus longue que les deux autres ici .", "court aussi , oui ."]
    refs_raw = ["un court ici.", "cette phrase l'est bien plus longue que les deux autres ici.", "court aussi, oui."]
    hyps = ["un court ici .", "cette phrase est plus longue que les autres .", "court aussi , oui ."]
    return {
        "hyps_all": _write(tmp_path / "hyps.tok", hyps),
        "refs_tok": _write(tmp_path / "refs.tok", refs_tok),
        "refs_raw": _write(tmp_path / "refs.raw", refs_raw),
        "src_tok": _write(tmp_path / "src.tok", src),
        "lang": "fr",
        "hyps_nounk": _write(tmp_path / "nounk.tok", ["un court ici .", "court aussi , oui ."]),
        "nounk_ids": _write(tmp_path / "nounk.ids", ["0", "2"]),
    }


def test_score_system(system_files):
    scores = score_system(**system_files, window=4, max_x=12, threshold=5)
    assert scores["n_all"] == 3 and scores["n_nounk"] == 2
    assert scores["bleu_nounk"] == pytest.approx(100.0)
    assert 0 < scores["bleu_all"] < 100
    assert 0 < scores["sacrebleu_all"] < 100 and scores["sacrebleu_nounk"] == pytest.approx(100.0)
    assert "tok:13a" in scores["sacrebleu_signature"]
    assert [p["x"] for p in scores["length_curve"]] == list(range(1, 13))
    assert scores["split"]["short"]["n"] == 2 and scores["split"]["long"]["n"] == 1  # source lengths 5, 13, 3
    assert (scores["length_by"], scores["window"]) == ("source", 4)


def test_score_system_length_by_reference(system_files):
    by_source = score_system(**system_files, threshold=3)  # source lengths 5, 13, 3
    by_reference = score_system(**system_files, threshold=3, length_by="reference")  # reference lengths 4, 13, 5
    assert by_source["split"]["long"]["n"] == 2
    assert by_reference["split"]["long"]["n"] == 3 and by_reference["length_by"] == "reference"
    with pytest.raises(UserError, match="length_by"):
        score_system(**system_files, length_by="target")


def test_score_system_names_files_with_mismatched_line_counts(system_files):
    _write(system_files["refs_raw"], ["only one line"])
    with pytest.raises(UserError, match=r"refs\.raw has 1"):
        score_system(**system_files)


def test_score_system_checks_nounk_files(system_files):
    _write(system_files["hyps_nounk"], ["un court ici ."])
    with pytest.raises(UserError, match=r"nounk\.tok has 1"):
        score_system(**system_files)
    _write(system_files["nounk_ids"], ["0", "7"])
    with pytest.raises(UserError, match="outside"):
        score_system(**system_files)
    _write(system_files["nounk_ids"], ["0", "x"])
    with pytest.raises(UserError, match=r"nounk\.ids:2"):
        score_system(**system_files)


def test_score_system_splits_lines_on_newline_only(system_files):
    # U+2028 is a line break for str.splitlines but not for the corpus tools.
    _write(system_files["refs_raw"], ["un\u2028court ici.", "x", "court aussi, oui."])
    assert score_system(**system_files)["n_all"] == 3


def _scores(bleu_all, short, long, threshold=30):
    return {
        "bleu_all": bleu_all,
        "bleu_nounk": bleu_all + 5,
        "sacrebleu_all": bleu_all - 1,
        "sacrebleu_nounk": bleu_all + 4,
        "sacrebleu_signature": SIGNATURE,
        "split": {"threshold": threshold, "short": {"bleu": short, "n": 80}, "long": {"bleu": long, "n": 20}},
    }


BLEU_ROWS = [
    {"system": "RNNsearch-50", "scores": _scores(26.0, 27.0, 25.0), "published": {"all": 26.75, "nounk": 34.16}},
    {"system": "Moses", "scores": None, "published": {"all": 33.30, "nounk": 35.63}},
    {"system": "extra", "scores": _scores(10.0, 11.0, 8.0), "published": None},
]


def test_bleu_table_columns_and_deltas():
    df = bleu_table(BLEU_ROWS, demo=False)
    assert list(df.columns) == [
        "System",
        "BLEU All",
        "BLEU No-UNK",
        "sacreBLEU All (detok)",
        "sacreBLEU No-UNK (detok)",
        "published All",
        "published No-UNK",
        "delta All",
        "delta No-UNK",
    ]
    search, moses, extra = (row for _, row in df.iterrows())
    assert search["delta All"] == pytest.approx(26.0 - 26.75)
    assert search["delta No-UNK"] == pytest.approx(31.0 - 34.16)
    assert pd.isna(moses["BLEU All"]) and moses["published All"] == 33.30 and pd.isna(moses["delta All"])
    assert pd.isna(extra["published All"]) and pd.isna(extra["delta All"])


def test_bleu_table_demo_has_no_deltas():
    df = bleu_table(BLEU_ROWS, demo=True)
    assert not [c for c in df.columns if c.startswith("delta")]
    assert "published All" in df.columns


def test_bleu_table_rejects_incomplete_rows():
    with pytest.raises(UserError, match="bleu_nounk"):
        bleu_table([{"system": "x", "scores": {"bleu_all": 1.0}, "published": None}], demo=True)
    with pytest.raises(UserError):
        bleu_table([], demo=True)


def test_write_table_csv_and_markdown(tmp_path):
    df = bleu_table(BLEU_ROWS, demo=False)
    csv_path, md_path = tmp_path / "t1.csv", tmp_path / "t1.md"
    write_table(df, csv_path, md_path, title="Table 1", banner=None)
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert rows[0]["System"] == "RNNsearch-50" and rows[0]["delta All"] == "-0.75"
    assert rows[1]["BLEU All"] == "" and rows[1]["published All"] == "33.30"
    md = md_path.read_text(encoding="utf-8")
    assert md.startswith("# Table 1\n")
    assert "| RNNsearch-50 | 26.00 | 31.00 | 25.00 | 30.00 | 26.75 | 34.16 | -0.75 | -3.16 |" in md
    assert "| Moses | — | — | — | — | 33.30 | 35.63 | — | — |" in md
    assert f"`{SIGNATURE}`" in md
    assert "Synthetic demo data" not in md
    assert not list(tmp_path.glob(".*part"))


def test_write_table_demo_banner(tmp_path):
    df = bleu_table(BLEU_ROWS, demo=True)
    write_table(df, tmp_path / "t.csv", tmp_path / "t.md", title="T", banner=DEMO_BANNER)
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert DEMO_BANNER in md and "delta All" not in md


META = {"updates": 288000, "epochs": 2.2, "wall_time_s": 7200.0, "train_nll": 41.5, "dev_nll": 38.0, "device": "H200"}
PUBLISHED2 = {"updates": 288000, "epochs": 2.2, "hours": 111, "train_nll": 40.7, "dev_nll": 38.1}


def test_learning_table_columns_hours_and_deltas(tmp_path):
    rows = [{"system": "RNNsearch-50", "meta": META, "published": PUBLISHED2}, {"system": "new", "meta": META, "published": None}]
    df = learning_table(rows, demo=False)
    assert list(df.columns) == [
        "System",
        "Updates",
        "Epochs",
        "Hours",
        "Train NLL",
        "Dev NLL",
        "Device",
        "published Updates",
        "published Epochs",
        "published Hours",
        "published Train NLL",
        "published Dev NLL",
        "delta Train NLL",
        "delta Dev NLL",
    ]
    first = df.iloc[0]
    assert first["Hours"] == pytest.approx(2.0) and first["Updates"] == 288000
    assert first["delta Train NLL"] == pytest.approx(0.8) and first["delta Dev NLL"] == pytest.approx(-0.1)
    write_table(df, tmp_path / "t2.csv", tmp_path / "t2.md", title="Table 2", banner=None)
    md = (tmp_path / "t2.md").read_text(encoding="utf-8")
    expected = "| RNNsearch-50 | 288000 | 2.20 | 2.00 | 41.50 | 38.00 | H200 | 288000 | 2.20 | 111.00 | 40.70 | 38.10 |"
    assert f"{expected} +0.80 | -0.10 |" in md


def test_learning_table_demo_and_validation():
    df = learning_table([{"system": "s", "meta": META, "published": PUBLISHED2}], demo=True)
    assert not [c for c in df.columns if c.startswith("delta")]
    with pytest.raises(UserError, match="raw count"):
        learning_table([{"system": "s", "meta": META, "published": {**PUBLISHED2, "updates": 2.88}}], demo=True)
    with pytest.raises(UserError, match="wall_time_s"):
        learning_table([{"system": "s", "meta": {"updates": 1}, "published": None}], demo=True)


def test_attention_check_passes():
    scores = {"RNNsearch-50": _scores(20.0, 21.0, 18.0), "RNNencdec-50": _scores(15.0, 17.0, 9.0)}
    passed, text = attention_check(scores)
    assert passed
    assert "lead +5.00" in text and "18.00 / 21.00 = 0.86" in text and "9.00 / 17.00 = 0.53" in text
    assert "<= 30 +4.00, length > 30 +9.00" in text and "PASS" in text


def test_attention_check_reads_robustness_to_length_as_the_share_of_bleu_kept_not_the_lead():
    """The demo's case: encdec near BLEU's floor on both sides, so the lead shrinks on long sentences (+61 to
    +59) while search keeps 85% of its BLEU and encdec 52%: the paper's claim holds."""
    scores = {"RNNsearch-50": _scores(78.0, 82.0, 70.0), "RNNencdec-50": _scores(16.0, 21.0, 11.0)}
    passed, text = attention_check(scores)
    assert passed and "0.85" in text and "0.52" in text and "+61.00, length > 30 +59.00" in text


def test_attention_check_fails_when_search_loses_a_larger_share_on_long_sentences():
    scores = {"RNNsearch-50": _scores(20.0, 22.0, 10.0), "RNNencdec-50": _scores(15.0, 17.0, 9.0)}
    passed, text = attention_check(scores)
    assert not passed and "= 0.45" in text and text.endswith("Result: FAIL")


def test_attention_check_fails_without_bleu_on_short_sentences():
    scores = {"RNNsearch-50": _scores(20.0, 21.0, 18.0), "RNNencdec-50": _scores(1.0, 0.0, 2.0)}
    passed, text = attention_check(scores)
    assert not passed and "cannot compare" in text


def test_attention_check_fails_when_encdec_is_better():
    scores = {"RNNsearch-50": _scores(14.0, 15.0, 12.0), "RNNencdec-50": _scores(15.0, 17.0, 9.0)}
    assert not attention_check(scores)[0]


def test_attention_check_fails_without_long_sentences():
    scores = {"RNNsearch-50": _scores(20.0, 21.0, None), "RNNencdec-50": _scores(15.0, 17.0, None)}
    passed, text = attention_check(scores)
    assert not passed and "cannot compare" in text


def test_attention_check_missing_systems_and_thresholds():
    with pytest.raises(UserError, match="RNNencdec-50"):
        attention_check({"RNNsearch-50": _scores(20.0, 21.0, 18.0)})
    scores = {"a": _scores(20.0, 21.0, 18.0), "b": _scores(15.0, 17.0, 9.0, threshold=20)}
    with pytest.raises(UserError, match="thresholds"):
        attention_check(scores, search="a", encdec="b")


def test_score_system_without_nounk_and_with_rejoined_hyphens(system_files, tmp_path):
    files = {k: v for k, v in system_files.items() if k not in ("hyps_nounk", "nounk_ids")}
    files["hyps_all"] = _write(tmp_path / "h.tok", ["un court @-@ ici .", "cette phrase est plus longue que les autres .", "court aussi , oui ."])
    files["refs_tok"] = _write(tmp_path / "r.tok", ["un court-ici .", system_files["refs_tok"].read_text().splitlines()[1], "court aussi , oui ."])
    plain, rejoined = score_system(**files), score_system(**files, rejoin=True)
    assert plain["bleu_nounk"] is None and plain["n_nounk"] is None
    assert rejoined["bleu_all"] > plain["bleu_all"] and rejoined["hyphens_rejoined"]
    assert [g["n"] for g in rejoined["length_groups"]] == [3]
    with pytest.raises(UserError, match="give both or neither"):
        score_system(**files, nounk_ids=system_files["nounk_ids"])


def test_luong_table_reads_perplexity_bleu_and_unk_columns():
    scores = {"bleu_all": 18.0, "sacrebleu_all": 17.0, "sacrebleu_signature": SIGNATURE}
    rows = [
        {"system": "WMT best", "published": {"bleu": 20.7}},
        {
            "system": "global (dot)",
            "scores": scores,
            "scores_unk": {**scores, "bleu_all": 19.5},
            "meta": {"heldout_ppl": {"test": 6.5}},
            "published": {"ppl": 6.1, "bleu": 18.6, "bleu_unk": 20.5},
        },
        {"system": "global (concat)", "scores": scores, "scores_unk": scores, "meta": {"heldout_ppl": {"test": 7.0}}, "published": {"ppl": 6.7}},
    ]
    df = luong_table(rows, demo=False, unk_column=True)
    row = df.iloc[1]
    assert (row["Ppl"], row["BLEU"], row["BLEU +unk"]) == (6.5, 18.0, 19.5)
    assert row["delta Ppl"] == pytest.approx(0.4) and row["delta BLEU +unk"] == pytest.approx(-1.0)
    assert pd.isna(df.iloc[0]["BLEU"]) and df.iloc[0]["published BLEU"] == 20.7
    assert pd.isna(df.iloc[2]["delta BLEU"]) and df.iloc[2]["delta Ppl"] == pytest.approx(0.3)
    demo = luong_table(rows, demo=True)
    assert "BLEU +unk" not in demo.columns and not any(c.startswith("delta") for c in demo.columns)
    assert any("mteval" in note for note in demo.attrs["notes"])


def test_a_systems_table_shows_bleu_sacrebleu_and_the_perplexities_each_system_reports():
    """kind: systems, for one's own systems: no published columns; a system without a test perplexity shows none."""
    scores = {"bleu_all": 21.3, "sacrebleu_all": 20.9, "sacrebleu_signature": SIGNATURE}
    rows = [
        {"system": "RNNsearch", "scores": scores, "meta": {"heldout_ppl": {"dev": 9.1}}},
        {"system": "global (dot) + feed", "scores": {**scores, "bleu_all": 23.0}, "meta": {"heldout_ppl": {"dev": 7.5, "test": 7.9}}},
        {"system": "not trained here", "scores": None, "meta": None},
    ]
    df = systems_table(rows, demo=False)
    assert list(df.columns) == ["System", "BLEU", "sacreBLEU (detok)", "Dev ppl", "Test ppl"]
    assert list(df.iloc[0][1:4]) == [21.3, 20.9, 9.1] and pd.isna(df.iloc[0]["Test ppl"]) and df.iloc[1]["Test ppl"] == 7.9
    assert df.iloc[2].isna().sum() == 4 and SIGNATURE in df.attrs["notes"][1]
    with pytest.raises(UserError, match="at least one row"):
        systems_table([], demo=False)


def test_nist_table_compares_sacrebleu_with_the_published_nist_bleu():
    scores = {"bleu_all": 25.3, "sacrebleu_all": 24.2, "sacrebleu_signature": SIGNATURE}
    rows = [
        {"system": "Top - NMT + 5-gram rerank (Montreal)", "published": {"bleu": 24.9}},
        {"system": "local-p (general) + unk replace", "scores": {**scores, "sacrebleu_all": 21.0}},
        {"system": "Ensemble 8 models + unk replace", "scores": scores, "published": {"bleu": 25.9}},
    ]
    df = nist_table(rows, demo=False)
    assert list(df.columns) == ["System", "sacreBLEU 13a (detok)", "BLEU (tok)", "published NIST BLEU", "delta NIST BLEU"]
    assert df.iloc[2]["delta NIST BLEU"] == pytest.approx(24.2 - 25.9)  # against sacreBLEU, not tokenized BLEU
    assert pd.isna(df.iloc[0]["sacreBLEU 13a (detok)"]) and pd.isna(df.iloc[1]["delta NIST BLEU"])
    assert "Ppl" not in df.columns and "NIST BLEU" in df.attrs["notes"][0] and SIGNATURE in df.attrs["notes"][1]
    demo = nist_table(rows, demo=True)
    assert not any(c.startswith("delta") for c in demo.columns)
    with pytest.raises(UserError, match="at least one row"):
        nist_table([], demo=False)


def _spec(kind: str, rows: list[dict], **extra) -> dict:
    return {"kind": kind, "title": "T", "demo": False, "rows": rows, "check": None, **extra}


def test_table_command_reads_the_files_its_kind_names(tmp_path, capsys):
    """A learning row's file is a meta.json; a luong row reads scores, UNK-replaced scores and meta.json."""
    meta = _write(tmp_path / "meta.json", [json.dumps({**META, "heldout_ppl": {"test": 6.5}})])
    scores = _write(tmp_path / "scores.json", [json.dumps({"bleu_all": 18.0, "sacrebleu_all": 17.0, "sacrebleu_signature": SIGNATURE})])
    row = {"label": "RNNsearch-50", "system": "RNNsearch-50", "published": PUBLISHED2, "file": str(meta)}
    table_command(_spec("learning", [row]), tmp_path / "l.csv", tmp_path / "l.md")
    assert next(csv.DictReader((tmp_path / "l.csv").open(encoding="utf-8")))["delta Dev NLL"] == "-0.10"
    row = {"label": "global", "system": "global", "published": {"ppl": 6.1}, "file": str(scores), "unk_file": str(scores), "meta": str(meta)}
    table_command(_spec("luong", [row], unk_column=True), tmp_path / "u.csv", tmp_path / "u.md")
    read = next(csv.DictReader((tmp_path / "u.csv").open(encoding="utf-8")))
    assert (read["Ppl"], read["BLEU +unk"], read["delta Ppl"]) == ("6.50", "18.00", "0.40")
    capsys.readouterr()


def test_table_command_refuses_an_unknown_kind(tmp_path):
    with pytest.raises(UserError, match=r"Table kind 'bleu2' is unknown; expected one of bleu, learning, luong, nist, systems, splits\."):
        table_command(_spec("bleu2", []), tmp_path / "t.csv", tmp_path / "t.md")


def test_table_kinds_are_the_config_schema_enum():
    schema_path = Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml"
    schema = yaml.safe_load(schema_path.read_text(encoding="utf-8"))
    assert list(TABLE_KINDS) == schema["properties"]["tables"]["additionalProperties"]["properties"]["kind"]["enum"]


def test_a_splits_table_shows_each_held_out_set_beside_the_published_rows_with_seeds(tmp_path, capsys):
    """Multi30k's table: BLEU and sacreBLEU on each split, dev perplexity, updates and hours from meta.json, a
    published row, deltas against it and whether they are within the tolerance; a row of three seeds is their mean."""
    splits = ["val", "test_2016_flickr"]
    meta = {**META, "heldout_ppl": {"dev": 12.0}, "model_update": 9000, "updates": 19000, "wall_time_s": 1800.0, "device": "cpu"}

    def run(seed: int, bleu: float) -> dict:
        files = {c: str(_write(tmp_path / f"{c}{seed}.json", [json.dumps(_scores(bleu + i, 0.0, 0.0))])) for i, c in enumerate(splits)}
        return {"seed": seed, "splits": files, "meta": str(_write(tmp_path / f"m{seed}.json", [json.dumps(meta)]))}

    runs = [run(1, 38.5), run(2, 37.0), run(3, 39.5)]
    published = {"val": 39.17, "test_2016_flickr": 39.0}
    rows = [
        {"label": "nmtpy, published", "published": published},
        {"label": "RNNsearch", "system": "s", "published": published, **{k: runs[0][k] for k in ("splits", "meta")}, "seeds": runs},
        {"label": "RNNencdec", "system": "e", **{k: run(4, 20.0)[k] for k in ("splits", "meta")}},
    ]
    table_command(_spec("splits", rows, splits=splits, tolerance=1.0), tmp_path / "t.csv", tmp_path / "t.md")
    nmtpy, search, encdec = list(csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8")))
    assert (nmtpy["BLEU val"], nmtpy["published test_2016_flickr"], nmtpy["within 1 BLEU"]) == ("", "39.00", "")
    assert (search["BLEU val"], search["BLEU test_2016_flickr (seed 1)"], search["sacreBLEU test_2016_flickr (detok)"]) == ("38.33", "39.50", "38.33")
    assert (search["delta test_2016_flickr"], search["within 1 BLEU"], search["Seeds"]) == ("0.33", "yes", "3")
    assert (search["Dev ppl"], search["Best"], search["Hours"], search["Device"]) == ("12.00", "9000.00", "0.50", "cpu")
    assert (encdec["BLEU test_2016_flickr"], encdec["delta val"], encdec["within 1 BLEU"]) == ("21.00", "", "")
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert "| 38.33 ± 1.26 |" in md and "within 1 BLEU: every delta of the row is at most 1 BLEU" in md
    capsys.readouterr()


def test_several_seeds_show_mean_and_sample_sd_with_each_seed_in_the_csv(tmp_path, capsys):
    """Table 1 with a system of three seeds and one of one: mean ± sd by hand from the per-seed CSV values."""
    files = {s: _write(tmp_path / f"s{s}.json", [json.dumps(_scores(b, b + 1, b - 1))]) for s, b in ((1, 20.0), (2, 23.0), (3, 29.0))}
    one = _write(tmp_path / "one.json", [json.dumps(_scores(10.0, 11.0, 9.0))])
    rows = [
        {
            "label": "RNNsearch-50",
            "system": "rnnsearch-50",
            "published": {"all": 26.75, "nounk": 34.16},
            "file": str(files[1]),
            "seeds": [{"seed": s, "file": str(f)} for s, f in files.items()],
        },
        {"label": "RNNencdec-50", "system": "rnnencdec-50", "published": None, "file": str(one)},
    ]
    table_command(_spec("bleu", rows), tmp_path / "t.csv", tmp_path / "t.md")
    search, encdec = list(csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8")))
    per_seed = [float(search[f"BLEU All (seed {s})"]) for s in (1, 2, 3)]
    mean = sum(per_seed) / 3
    sd = (sum((v - mean) ** 2 for v in per_seed) / 2) ** 0.5  # sample sd, n - 1
    assert per_seed == [20.0, 23.0, 29.0] and float(search["BLEU All"]) == pytest.approx(mean) and search["Seeds"] == "3"
    assert float(search["delta All"]) == pytest.approx(mean - 26.75)
    assert encdec["Seeds"] == "1" and encdec["BLEU All (seed 1)"] == "" and encdec["BLEU All"] == "10.00"
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert f"| {mean:.2f} ± {sd:.2f} |" in md and "(seed 1)" not in md and "| 10.00 |" in md and "sample standard deviation" in md
    capsys.readouterr()


def test_the_attention_check_runs_once_per_seed(tmp_path, capsys):
    search = {s: _write(tmp_path / f"a{s}.json", [json.dumps(_scores(30.0, 31.0, 29.0))]) for s in (1, 2)}
    encdec = {s: _write(tmp_path / f"b{s}.json", [json.dumps(_scores(20.0, 26.0, 10.0))]) for s in (1, 2)}
    rows = [
        {"label": name, "system": name, "published": None, "file": str(files[1]), "seeds": [{"seed": s, "file": str(f)} for s, f in files.items()]}
        for name, files in (("rnnsearch-50", search), ("rnnencdec-50", encdec))
    ]
    table_command(_spec("bleu", rows, check={"search": "rnnsearch-50", "encdec": "rnnencdec-50"}), tmp_path / "t.csv", tmp_path / "t.md")
    md = (tmp_path / "t.md").read_text(encoding="utf-8")
    assert md.count("Result: PASS") == 2 and "Seed 1\nAttention check" in md and "Seed 2\nAttention check" in md
    capsys.readouterr()


def test_the_markdown_names_the_data_the_rows_not_run_and_table_2s_columns(tmp_path, capsys):
    meta = _write(tmp_path / "meta.json", [json.dumps(META)])
    row = {"label": "RNNsearch-50", "system": "rnnsearch-50", "published": PUBLISHED2, "file": str(meta)}
    data = "Data: this run (demo scale) en→fr on rnnmt's synthetic corpora (not WMT), trained on demo-news. The paper: WMT'14 English-French."
    table_command(_spec("learning", [row], data=data, not_run=["rnnsearch-50star"]), tmp_path / "l.csv", tmp_path / "l.md")
    md = (tmp_path / "l.md").read_text(encoding="utf-8").split("\n\n")
    assert md[0] == "# T" and md[1] == data and md[2].startswith("| System |")
    assert "Train NLL = the mean NLL per sentence (nats) over the last log window" in md[3]
    assert md[4] == "Rows of the paper's table not run at this scale: rnnsearch-50star (config `systems`).\n"
    assert "Data:" not in (tmp_path / "l.csv").read_text(encoding="utf-8")
    capsys.readouterr()


def _variant_run(tmp_path, name, hyps, refs_tok, refs_raw, src, ppl):
    """One run's files for the variants table: translations, their scores (score_system) and a meta.json."""
    hyps_path = _write(tmp_path / f"{name}.tok", hyps)
    scores = score_system(hyps_all=hyps_path, refs_tok=refs_tok, refs_raw=refs_raw, src_tok=src, lang="fr", threshold=5)
    scores_path = _write(tmp_path / f"{name}.json", [json.dumps(scores)])
    meta_path = _write(tmp_path / f"{name}.meta.json", [json.dumps({"heldout_ppl": {"dev": ppl}})])
    return {"seed": 1, "hyps": str(hyps_path), "scores": str(scores_path), "meta": str(meta_path)}, scores


def test_the_variants_table_compares_each_variant_with_its_baseline_on_both_metrics(tmp_path, capsys):
    from rnnmt.evaluate.report import variants_command

    refs_raw = [f"le chat numéro {i} dort sur le tapis{' rouge et chaud' * (i % 3)}." for i in range(60)]
    refs_tok = [r[:-1] + " ." for r in refs_raw]
    src = [f"the cat number {i} sleeps{' on the warm red mat' * (i % 3)} ." for i in range(60)]
    worse = [" ".join(w if j % 3 else "chien" for j, w in enumerate(r.split())) for r in refs_tok]
    paths = {"refs_tok": _write(tmp_path / "refs.tok", refs_tok), "refs_raw": _write(tmp_path / "refs.raw", refs_raw)}
    src_path = _write(tmp_path / "src.tok", src)
    base, base_scores = _variant_run(tmp_path, "base", worse, paths["refs_tok"], paths["refs_raw"], src_path, 9.0)
    good, good_scores = _variant_run(tmp_path, "good", refs_tok, paths["refs_tok"], paths["refs_raw"], src_path, 7.5)
    same, _ = _variant_run(tmp_path, "same", worse, paths["refs_tok"], paths["refs_raw"], src_path, 9.0)
    group = {
        "baseline": {"label": "Base", "runs": [base]},
        "variants": [{"label": "Better", "runs": [good]}, {"label": "Same", "runs": [same]}],
        **{k: str(v) for k, v in paths.items()},
        "lang": "fr",
        "rejoin": False,
        "lowercase": False,
    }
    spec = {"title": "Variants", "demo": False, "samples": 200, "seed": 1, "groups": [group]}
    variants_command(spec, tmp_path / "v.csv", tmp_path / "v.md")
    rows = list(csv.DictReader((tmp_path / "v.csv").open(encoding="utf-8")))
    assert [r["System"] for r in rows] == ["Base", "Better", "Same"] and [r["Compared with"] for r in rows] == ["(the baseline)", "Base", "Base"]
    better, unchanged = rows[1], rows[2]
    assert float(better["delta BLEU"]) == pytest.approx(good_scores["bleu_all"] - base_scores["bleu_all"], abs=0.006)
    assert float(better["delta sacreBLEU"]) == pytest.approx(good_scores["sacrebleu_all"] - base_scores["sacrebleu_all"], abs=0.006)
    assert (better["p (BLEU)"], better["p (sacreBLEU)"]) == ("0.010", "0.010")  # 2/201: no resample at or below 0
    assert (unchanged["delta BLEU"], unchanged["p (BLEU)"], unchanged["p (sacreBLEU)"]) == ("0.00", "1.000", "1.000")
    assert (better["Dev ppl"], better["Test ppl"]) == ("7.50", "")
    assert float(better["BLEU, source > 5 words"]) == pytest.approx(good_scores["split"]["long"]["bleu"], abs=0.006)
    assert "Seeds" not in rows[0] and "| Better | Base |" in (tmp_path / "v.md").read_text()
    capsys.readouterr()


def test_the_variants_table_averages_seeds_and_tests_them_with_the_two_level_bootstrap(tmp_path, capsys):
    from rnnmt.evaluate.report import variants_command
    from rnnmt.evaluate.significance import bootstrap

    refs_raw = [f"le chat numéro {i} dort sur le tapis{' rouge' * (i % 4)}." for i in range(40)]
    refs_tok = [r[:-1] + " ." for r in refs_raw]
    src = _write(tmp_path / "src.tok", [f"the cat {i} sleeps ." for i in range(40)])
    paths = {"refs_tok": _write(tmp_path / "refs.tok", refs_tok), "refs_raw": _write(tmp_path / "refs.raw", refs_raw)}
    damaged = [[" ".join(w if j % every else "chien" for j, w in enumerate(r.split())) for r in refs_tok] for every in (2, 3)]
    runs, scores = {}, {}
    for name, hyps in {"base1": damaged[0], "base2": damaged[1], "var1": refs_tok, "var2": damaged[1]}.items():
        runs[name], scores[name] = _variant_run(tmp_path, name, hyps, paths["refs_tok"], paths["refs_raw"], src, 5.0)
    group = {
        "baseline": {"label": "Base", "runs": [runs["base1"], {**runs["base2"], "seed": 2}]},
        "variants": [{"label": "Var", "runs": [runs["var1"], {**runs["var2"], "seed": 2}]}],
        **{k: str(v) for k, v in paths.items()},
        "lang": "fr",
        "rejoin": False,
        "lowercase": False,
    }
    variants_command({"title": "Variants", "demo": False, "samples": 100, "seed": 1, "groups": [group]}, tmp_path / "v.csv", tmp_path / "v.md")
    base, var = csv.DictReader((tmp_path / "v.csv").open(encoding="utf-8"))
    assert (base["Seeds"], var["Seeds"]) == ("2", "2")  # the means over seeds, and how many
    means = {side: (scores[f"{side}1"]["bleu_all"] + scores[f"{side}2"]["bleu_all"]) / 2 for side in ("base", "var")}
    assert float(base["BLEU"]) == pytest.approx(means["base"], abs=0.006) and float(var["BLEU"]) == pytest.approx(means["var"], abs=0.006)
    assert float(var["delta BLEU"]) == pytest.approx(means["var"] - means["base"], abs=0.006)
    # The interval and p of the two-level bootstrap over both seeds of each side, not of one seed's translations.
    expected = bootstrap([refs_tok, damaged[1]], damaged, refs_tok, 100, 1)
    assert var["95% interval"] == f"[{expected.low:+.2f}, {expected.high:+.2f}]" and var["p (BLEU)"] == f"{expected.p_value:.3f}"
    assert expected.seeds_a == expected.seeds_b == 2
    capsys.readouterr()
