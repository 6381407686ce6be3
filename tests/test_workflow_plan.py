"""rnnmt.workflow without Snakemake: what runs at a scale, the rules' inputs and flags, the settings files."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from rnnmt import config as cfg
from rnnmt.workflow import paths
from rnnmt.workflow.inputs import RuleInputs
from rnnmt.workflow.plan import Plan, score_name, score_name_parts, translation_of
from rnnmt.workflow.reports import Reports

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def plan_at(scale: str, **override) -> Plan:
    raw = cfg.deep_merge(cfg.read_yaml(ROOT / "config.yaml"), {"scale": scale, **override})
    return Plan.load(raw, SCHEMA)


@pytest.fixture(scope="module")
def demo() -> Plan:
    return plan_at("demo")


@pytest.fixture(scope="module")
def paper() -> Plan:
    return plan_at("paper")


def test_paths_default_to_the_rules_wildcards_and_fill_in_values():
    assert paths.tok() == "results/data/tok/{pair}/{split}.{lang}"
    assert paths.tok("en-fr", "test", "fr") == "results/data/tok/en-fr/test.fr"
    assert paths.translation(ext="align") == "results/translations/{system}/{split}.{subset}.align"
    assert paths.scores(score_name("luong-ensemble", True, "test-newstest2015")) == "results/scores/test-newstest2015/luong-ensemble.unk.json"
    assert paths.log("train", "{system}") == "results/logs/train/{system}.log"


@pytest.mark.parametrize("name", ["rnnsearch-50", "rnnsearch-50.unk", "test-newstest2015/luong-ensemble.unk", "test-x/a"])
def test_score_names_round_trip(name):
    assert score_name(*[score_name_parts(name)[i] for i in (1, 2, 0)]) == name


def test_the_demo_runs_its_listed_systems_and_makes_every_output(demo):
    assert demo.demo and demo.systems == [
        "rnnencdec-30",
        "rnnsearch-30",
        "rnnencdec-50",
        "rnnsearch-50",
        "luong-reverse-dropout",
        "luong-global-dot-feed",
        "luong-localm-dot-feed",
    ]
    assert demo.ensembles == [] and demo.pairs == ["en-fr"]
    targets = demo.final_targets()
    for name in ("bahdanau2014_table1", "bahdanau2014_table2", "luong2015_table1", "luong2015_table4", "claims", "coverage"):
        assert paths.table(name, "md") in targets
    assert "results/tables/luong2015_table2.md" not in targets  # its rows need the ensemble or local-p (general)
    drawn = ("bahdanau2014_fig2", "bahdanau2014_fig3", "luong2015_fig5", "luong2015_fig6", "luong2015_fig7", "learning_bahdanau2014_table1")
    assert {paths.figure(f) for f in (*drawn, "learning_luong2015_table1", "learning_luong2015_table4")} <= set(targets)
    assert paths.figure("learning_luong2015_table3") not in targets  # De-En: no system of it at the demo scale
    assert targets[-2:] == [paths.raw_report("en-fr"), paths.provenance()]


def test_training_reads_its_settings_file_data_and_held_out_sets(demo):
    inputs = RuleInputs(demo)
    w = SimpleNamespace(system="luong-global-dot-feed")
    got = inputs.train(w)
    assert got == {
        "system": "results/config/luong-global-dot-feed.json",
        "train": "results/data/bin/en-fr/train.pt",
        "heldout_dev": "results/data/bin/en-fr/dev.pt",
        "heldout_test": "results/data/bin/en-fr/test.pt",
        "src_vocab": "results/data/vocab/en-fr/vocab.en.json",
        "tgt_vocab": "results/data/vocab/en-fr/vocab.fr.json",
    }
    assert inputs.train_flags(w, got) == "--valid dev=results/data/bin/en-fr/dev.pt --valid test=results/data/bin/en-fr/test.pt"


def test_translation_reads_the_systems_decode_settings_and_the_nounk_lines(demo):
    inputs = RuleInputs(demo)
    w = SimpleNamespace(system="rnnsearch-50", split="test", subset="nounk")
    got = inputs.translate(w)
    assert got["decode"] == "results/config/decode/rnnsearch-50.json" and got["models"] == ["results/models/rnnsearch-50/model.pt"]
    assert inputs.translate_flags(w, SimpleNamespace(**got)) == "--no-unk --lines results/data/nounk/en-fr/test.ids"
    assert Reports(demo).settings(SimpleNamespace(name="decode/rnnsearch-50")) == {"beam": 10, "normalize": False}
    assert Reports(demo).settings(SimpleNamespace(name="decode/luong-global-dot-feed"))["shrink"] is False


def test_demo_selection_is_axelrod_with_a_share_of_each_corpus(demo):
    inputs, w = RuleInputs(demo), SimpleNamespace(src="en", tgt="fr")
    assert inputs.select(w)["ids"] == "results/data/selection/en-fr/selected.npy"
    assert inputs.selection_cut_flags(w) == (
        "--corpora demo-news demo-general --cut per_corpus --normalise words_plus_eos --keep demo-news=1.0 --keep demo-general=0.5"
    )
    assert inputs.demo_corpus_flags().startswith("--out-dir results/data/raw/en-fr --seed 1234 --corpus demo-news:4000:train:news ")


def test_score_inputs_of_a_named_test_split_and_of_unk_replaced_output(paper):
    inputs = RuleInputs(paper)
    got = inputs.score(SimpleNamespace(score="test-newstest2015/luong-ensemble.unk"))
    assert got == {
        "hyps": "results/translations/luong-ensemble/test-newstest2015.unk.txt",
        "refs_tok": "results/data/tok/en-de/test-newstest2015.de",
        "refs_raw": "results/data/corpus/en-de/test-newstest2015.de",
        "src_tok": "results/data/tok/en-de/test-newstest2015.en",
    }
    plain = inputs.score(SimpleNamespace(score="rnnsearch-50"))
    assert plain["hyps_nounk"] == "results/translations/rnnsearch-50/test.nounk.txt"  # Bahdanau's No-UNK column
    flags = inputs.score_flags(SimpleNamespace(score="luong-base"), SimpleNamespace(keys=lambda: []))
    assert "--rejoin-hyphens" in flags and "--lang de" in flags
    assert translation_of("luong-base") == "results/translations/luong-base/test.all.txt"


def test_luong_table2_reads_the_scores_of_its_own_test_set(paper):
    reports = Reports(paper)
    spec = reports.table_spec("luong2015_table2")
    assert paper.table_splits["luong2015_table2"] == ["test-newstest2015"]
    files = [row.get("file") for row in spec["rows"]]
    assert files == [None, "results/scores/test-newstest2015/luong-localp-general-feed.unk.json", "results/scores/test-newstest2015/luong-ensemble.unk.json"]
    table4 = reports.table_spec("luong2015_table4")["rows"][0]
    assert table4["unk_file"] == "results/scores/luong-global-location-feed.unk.json" and table4["meta"].endswith("meta.json")


def test_settings_files_hold_what_their_readers_use(demo):
    reports = Reports(demo)
    names = reports.settings_names()
    assert "rnnsearch-50" in names and "decode/rnnsearch-50" in names and "tables/bahdanau2014_table1" in names
    training = reports.settings(SimpleNamespace(name="rnnsearch-50"))
    assert training == cfg.training_settings(demo.config, "rnnsearch-50") and "label" not in str(training)
    coverage = reports.settings(SimpleNamespace(name="coverage"))["rows"]
    made = {row["item"]: row["this run"] for row in coverage if row["paper"] == "Luong 2015"}
    assert made["Table 4"] == "yes" and made["Table 2"] == "no" and made["Table 6"] == "no"
    claims = reports.settings(SimpleNamespace(name="claims"))["claims"]
    assert claims[0]["a"] == "RNNsearch-50" and claims[0]["refs"] == "results/data/tok/en-fr/test.fr"


def test_only_the_paper_scale_compares_claims_with_the_published_differences(demo, paper):
    assert not Reports(demo).claims_spec()["comparable"] and Reports(paper).claims_spec()["comparable"]
    tolerances = {c["claim"]: c["tolerance"] for c in Reports(paper).claims_spec()["claims"]}
    assert set(tolerances.values()) == {1.0}  # evaluation.reproduced.tolerance: no claim sets its own
    own = plan_at("paper", evaluation={"reproduced": {"tolerance": 0.5}})
    assert {c["tolerance"] for c in Reports(own).claims_spec()["claims"]} == {0.5}


def test_wildcard_constraints_match_only_this_plans_names(demo, paper):
    import re

    demo_score = re.compile(demo.wildcard_constraints()["score"])
    assert demo_score.fullmatch("rnnsearch-50") and demo_score.fullmatch("rnnsearch-50.unk")
    assert not demo_score.fullmatch("luong-ensemble") and not demo_score.fullmatch("test-newstest2015/rnnsearch-50")
    assert re.compile(paper.wildcard_constraints()["score"]).fullmatch("test-newstest2015/luong-ensemble.unk")
    assert re.fullmatch(paper.test_splits, "test-newstest2015") and not re.fullmatch(demo.test_splits, "test-newstest2015")


def test_rule_files_name_paths_and_functions_and_compute_nothing():
    """Every results/ path comes from rnnmt.workflow.paths and every input function from the plan (issue 14)."""
    import re

    for smk in sorted((ROOT / "workflow" / "rules").glob("*.smk")):
        code = "\n".join(line.split("#", 1)[0] for line in smk.read_text().splitlines())
        assert "lambda" not in code, smk.name
        assert not re.search(r"""["']results/""", code), smk.name


def test_one_seed_keeps_every_name_and_path(demo):
    assert list(demo.runs) == demo.systems  # default seeds: [seed]
    assert Reports(demo).table_spec("bahdanau2014_table1")["rows"][0].keys() == {"label", "system", "published", "file"}


def test_each_seed_is_a_run_with_its_own_model_settings_and_scores():
    plan = plan_at("demo", seeds=[1, 2])
    assert plan.runs_of("rnnsearch-50") == ["rnnsearch-50", "rnnsearch-50.seed2"]
    inputs, reports = RuleInputs(plan), Reports(plan)
    second = SimpleNamespace(system="rnnsearch-50.seed2")
    assert inputs.train(second)["system"] == "results/config/rnnsearch-50.seed2.json"
    first, other = (reports.settings(SimpleNamespace(name=n)) for n in ("rnnsearch-50", "rnnsearch-50.seed2"))
    assert first["seed"] == 1 and other["seed"] == 2 and {**other, "seed": 1} == first
    translate = inputs.translate(SimpleNamespace(system="rnnsearch-50.seed2", split="test", subset="all"))
    assert translate["models"] == ["results/models/rnnsearch-50.seed2/model.pt"] and translate["decode"].endswith("decode/rnnsearch-50.json")
    row = reports.table_spec("bahdanau2014_table1")["rows"][3]
    assert row["system"] == "rnnsearch-50" and [s["seed"] for s in row["seeds"]] == [1, 2]
    assert row["seeds"][1]["file"] == "results/scores/rnnsearch-50.seed2.json"
    claim = reports.claims_spec()["claims"][0]
    assert [r["hyps"] for r in claim["runs_a"]] == ["results/translations/rnnsearch-50/test.all.txt", "results/translations/rnnsearch-50.seed2/test.all.txt"]
    curves = {c["label"]: c["files"] for c in reports.figure_spec("bahdanau2014_fig2")["curves"]}
    assert curves["RNNsearch-50"] == ["results/scores/rnnsearch-50.json", "results/scores/rnnsearch-50.seed2.json"]  # one mean curve with a band
    training = {c["label"]: c["files"] for c in reports.figure_spec("learning_bahdanau2014_table1")["curves"]}
    assert training["RNNsearch-50"] == ["results/models/rnnsearch-50/meta.json", "results/models/rnnsearch-50.seed2/meta.json"]
    heldout = reports.figure_spec("luong2015_fig5")
    assert heldout["heldout"] == "test" and all(len(c["files"]) == 1 for c in heldout["curves"])  # the first seed's history


def test_seeds_can_be_set_per_scale_and_per_system():
    plan = plan_at("demo", scales={"demo": {"seeds": [3]}}, systems={"rnnsearch-50": {"seeds": [1, 4]}})
    assert plan.runs_of("rnnencdec-50") == ["rnnencdec-50.seed3"]  # the reference seed 1 is not among the scale's
    assert plan.runs_of("rnnsearch-50") == ["rnnsearch-50", "rnnsearch-50.seed4"]
    assert RuleInputs(plan).train(SimpleNamespace(system="rnnencdec-50.seed3"))["system"] == "results/config/rnnencdec-50.seed3.json"
    assert Reports(plan).figure_inputs(SimpleNamespace(figure="bahdanau2014_fig3")) == ["results/alignments/rnnsearch-50.json"]


def test_an_ensemble_decodes_its_members_runs_of_one_seed():
    plan = plan_at("paper", seeds=[1, 2])
    assert plan.runs_of("luong-ensemble") == ["luong-ensemble", "luong-ensemble.seed2"]
    models = RuleInputs(plan).models("luong-ensemble.seed2")
    assert len(models) == 8 and all(".seed2/model.pt" in m for m in models)


@pytest.mark.parametrize(
    ("tables", "systems", "figures"),
    [
        (
            ["bahdanau2014_table1"],
            ["rnnencdec-30", "rnnsearch-30", "rnnencdec-50", "rnnsearch-50", "rnnsearch-50star"],
            ["bahdanau2014_fig2", "bahdanau2014_fig3", "learning_bahdanau2014_table1"],
        ),
        (
            ["luong2015_table3"],
            ["luong-de-base-reverse", "luong-de-global-location", "luong-de-global-location-feed", "luong-de-global-dot-drop-feed"],
            ["learning_luong2015_table3"],
        ),
    ],
)
def test_only_tables_trains_what_those_tables_need_and_makes_only_them(tables, systems, figures):
    plan = plan_at("paper", only_tables=tables)
    assert plan.systems == systems and plan.ensembles == []
    assert plan.tables_made() == tables
    assert [name for name, drawn in plan.figure_systems().items() if drawn] == figures
    assert plan.pairs == sorted({plan.pair_of(s) for s in systems})
    assert {paths.raw_report(pair) for pair in plan.pairs} <= set(plan.final_targets())


def test_only_tables_with_an_ensemble_row_trains_its_members():
    plan = plan_at("paper", only_tables=["luong2015_table2"])
    members = plan.config["ensembles"]["luong-ensemble"]["members"]
    assert set(plan.systems) == {*members, "luong-localp-general-feed"} and plan.ensembles == ["luong-ensemble"]


@pytest.mark.parametrize("table", ["luong2015_table3", "luong2015_table2"])
def test_only_tables_naming_a_table_the_scale_cannot_make_stops_with_one_line(table):
    """At the demo no row of these tables trains (Table 2's ensemble needs members the demo leaves out): one line
    before any job, naming the table's systems and the scales that make it, instead of a run that makes nothing."""
    rows = [row["system"] for row in cfg.read_yaml(ROOT / "config.yaml")["tables"][table]["rows"] if "system" in row]
    with pytest.raises(cfg.UserError) as stop:
        plan_at("demo", only_tables=[table])
    assert str(stop.value) == (
        f"config: only_tables names {table}, which scale 'demo' cannot make: it trains none of the table's systems "
        f"({', '.join(dict.fromkeys(rows))}; see scales.demo.systems); scale sample or paper makes it."
    )


def test_only_tables_naming_an_unknown_table_is_one_line():
    with pytest.raises(cfg.UserError, match=r"config: only_tables names bahdanau2014_table9, which are not under 'tables' \(known: bahdanau2014_table1,"):
        plan_at("paper", only_tables=["bahdanau2014_table9"])


def test_labels_name_only_the_settings_that_run_at_the_scale(demo, paper):
    # The demo trains Luong's dropout systems with dropout 0 (recipes.luong2015-dropout.overrides.demo).
    assert demo.resolved("luong-reverse-dropout")["model"]["dropout"] == 0.0
    assert demo.label("luong-reverse-dropout") == "Base + reverse"
    assert paper.label("luong-reverse-dropout") == "Base + reverse + dropout"
    assert paper.label("luong-de-global-dot-drop-feed") == "+ global (dot) + drop + feed"
    demo_spec, paper_spec = Reports(demo).table_spec("luong2015_table4"), Reports(paper).table_spec("luong2015_table4")
    assert demo_spec["title"] == "Luong et al. 2015, Table 4: attentional architectures (+ reverse + feed input)"
    assert paper_spec["title"] == "Luong et al. 2015, Table 4: attentional architectures (+ reverse + dropout + feed input)"
    rows = {r["system"]: r["label"] for r in Reports(paper).table_spec("luong2015_table1")["rows"] if r["system"]}
    assert rows["luong-global-location"] == "Base + reverse + dropout + global attention (location)"


def test_a_table_names_the_data_it_measured_and_the_paper_rows_the_scale_does_not_run(demo, paper):
    spec = Reports(demo).table_spec("luong2015_table1")
    assert spec["data"] == (
        "Data: this run (demo scale) en→fr on rnnmt's synthetic corpora (not WMT), trained on demo-news + demo-general, selected by axelrod, "
        "validated on demo-dev, tested on demo-test. The paper: WMT'14 English-German, newstest2014 (filtered)."
    )
    assert spec["not_run"] == [
        "luong-base",
        "luong-reverse",
        "luong-global-location",
        "luong-global-location-feed",
        "luong-localp-general-feed",
        "luong-ensemble",
    ]
    assert Reports(demo).table_spec("bahdanau2014_table1")["not_run"] == ["rnnsearch-50star"]
    paper_spec = Reports(paper).table_spec("luong2015_table1")
    assert paper_spec["not_run"] == [] and "this run (paper scale) en→de on WMT releases, trained on europarl-v7 + commoncrawl" in paper_spec["data"]


def legends(plan: Plan, figure: str) -> list[tuple[str, str]]:
    return [(c["label"], c["files"][0]) for c in Reports(plan).figure_spec(figure)["curves"]]


def test_figure_5_draws_the_papers_six_curves_or_their_stand_ins_with_the_papers_legends(demo, paper):
    assert [label for label, _ in legends(paper, "luong2015_fig5")] == [
        "basic",
        "basic+reverse",
        "basic+reverse+dropout",
        "basic+reverse+dropout+globalAttn",
        "basic+reverse+dropout+globalAttn+feedInput",
        "basic+reverse+dropout+pLocalAttn+feedInput",
    ]
    # The demo trains none of the paper's attention systems: its global (dot) and local-m (dot) stand in, named by their settings.
    assert legends(demo, "luong2015_fig5") == [
        ("basic+reverse", "results/models/luong-reverse-dropout/meta.json"),
        ("basic+reverse+globalAttn+feedInput", "results/models/luong-global-dot-feed/meta.json"),
        ("basic+reverse+mLocalAttn+feedInput", "results/models/luong-localm-dot-feed/meta.json"),
    ]


def test_figure_6_draws_every_attention_the_scale_decodes_with_the_papers_legends(demo, paper):
    assert legends(demo, "luong2015_fig6") == [
        ("ours, no attn", "results/scores/luong-reverse-dropout.json"),
        ("ours, global attn", "results/scores/luong-global-dot-feed.json"),
        ("ours, local-m attn, UNK replaced", "results/scores/luong-localm-dot-feed.unk.json"),
    ]
    assert [label for label, _ in legends(paper, "luong2015_fig6")] == [
        "ours, no attn",
        "ours, global attn",
        "ours, local-p attn, UNK replaced",
        "ours, best system, UNK replaced",
    ]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["systems"]["luong-base"].update(label="Base{dropuot}"), r"systems.luong-base.label names \{dropuot\}, which is not under 'label_words'"),
        (
            lambda c: c["tables"]["luong2015_table1"]["rows"][0].update(label="WMT{dropout}"),
            r"a row of tables.luong2015_table1 without a system names \{dropout\}",
        ),
        (lambda c: c["figures"]["luong2015_fig5"].update(legend="{attention}"), r"figures.luong2015_fig5.legend names \{attention\}"),
        (lambda c: c["figures"]["luong2015_fig6"]["rows"][0].update(stand_in=["luong-nowhere"]), r"figures.luong2015_fig6 names system 'luong-nowhere'"),
    ],
)
def test_label_word_and_stand_in_mistakes_are_one_line_before_any_job(change, message):
    raw = cfg.read_yaml(ROOT / "config.yaml")
    change(raw)
    with pytest.raises(cfg.UserError, match=message):
        Plan.load(raw, SCHEMA)


WIDE = {"of": "rnnsearch-50", "label": "RNNsearch-50 (wide)", "model": {"hidden": 256}}


def test_a_variant_trains_under_its_own_name_beside_its_baseline_and_leaves_the_paper_tables_as_they_are(demo):
    plan = plan_at("demo", variants={"rnnsearch-50-wide": WIDE})
    assert plan.systems == [*demo.systems, "rnnsearch-50-wide"] and plan.variants == {"rnnsearch-50": ["rnnsearch-50-wide"]}
    wide, base = plan.resolved("rnnsearch-50-wide"), plan.resolved("rnnsearch-50")
    assert wide["model"] == {**base["model"], "hidden": 256} and wide["train"] == base["train"]  # the one change, the rest the baseline's
    for table in demo.tables_made():
        assert plan.table_rows(table) == demo.table_rows(table)  # the paper's rows, intact
    targets = set(plan.final_targets())
    assert {paths.table("variants"), paths.figure("variants_training"), paths.figure("variants_length")} <= targets
    assert not {paths.table("variants"), paths.figure("variants_training")} & set(demo.final_targets())  # no variants: none of it
    assert [c.system for c in plan.figure_rows("variants_training")] == ["rnnsearch-50", "rnnsearch-50-wide"]
    spec = Reports(plan).variants_spec()
    (group,) = spec["groups"]
    assert group["baseline"]["label"] == "RNNsearch-50" and [v["label"] for v in group["variants"]] == ["RNNsearch-50 (wide)"]
    assert group["variants"][0]["runs"] == [
        {
            "seed": 1,
            "hyps": "results/translations/rnnsearch-50-wide/test.all.txt",
            "scores": "results/scores/rnnsearch-50-wide.json",
            "meta": "results/models/rnnsearch-50-wide/meta.json",
        }
    ]
    assert group["refs_tok"] == "results/data/tok/en-fr/test.fr" and group["lang"] == "fr" and not group["rejoin"]


def test_a_variant_follows_its_baseline_into_only_tables_and_out_of_a_scale_without_it():
    star = {"of": "rnnsearch-50star"}  # a paper-only system
    only = plan_at(
        "demo", variants={"rnnsearch-50-wide": WIDE, "dot-wide": {"of": "luong-global-dot-feed"}, "star-x": star}, only_tables=["bahdanau2014_table1"]
    )
    assert "rnnsearch-50-wide" in only.systems and "dot-wide" not in only.systems and "star-x" not in only.systems
    assert only.variants == {"rnnsearch-50": ["rnnsearch-50-wide"]}
    alone = plan_at("demo", variants={"star-x": star})
    assert "star-x" not in alone.systems and alone.variants == {} and paths.table("variants") not in alone.final_targets()
    paper = plan_at("paper", variants={"rnnsearch-50-wide": WIDE, "star-x": star})
    assert paper.systems.count("rnnsearch-50-wide") == 1 and paper.variants == {"rnnsearch-50": ["rnnsearch-50-wide"], "rnnsearch-50star": ["star-x"]}


def test_a_variants_own_settings_come_after_everything_its_baseline_sets_at_the_scale():
    # rnnencdec-30 sets its updates per scale (overrides.demo, overrides.paper): the variant's own value still wins.
    longer = {"of": "rnnencdec-30", "train": {"updates": 100}, "overrides": {"paper": {"model": {"hidden": 500}}}}
    for scale, hidden in (("demo", 128), ("paper", 500)):
        plan = plan_at(scale, variants={"encdec-100": longer})
        settings, base = plan.resolved("encdec-100"), plan.resolved("rnnencdec-30")
        assert settings["train"] == {**base["train"], "updates": 100} and settings["model"]["hidden"] == hidden, scale
    again = cfg.validate(plan.config, SCHEMA)  # a second validation of the same config (Snakemake's and a command's)
    assert again["systems"]["encdec-100"] == plan.config["systems"]["encdec-100"] and again["scales"]["paper"]["systems"].count("encdec-100") == 1


@pytest.mark.parametrize(
    ("variants", "message"),
    [
        ({"rnnsearch-50": WIDE}, "config: variants.rnnsearch-50 has the name of a system or an ensemble; give the variant a name of its own"),
        ({"wide": {"of": "rnnsearch-51"}}, "config: variants.wide.of 'rnnsearch-51' is not under 'systems'"),
        ({"wide": {"of": "rnnsearch-50", "modle": {}}}, "unknown key 'variants.wide.modle'"),
        ({"rnnsearch-50.seed2": {"of": "rnnsearch-50"}}, "config: variants.rnnsearch-50.seed2: a variant's name names its runs and files"),
        ({"a": {"of": "rnnsearch-50"}, "b": {"of": "a"}}, "config: variants.b.of 'a' is a variant; a variant changes a system under 'systems'"),
        ({"wide": {"of": "rnnsearch-50", "label": "{wdith}"}}, "config: variants.wide.label names {wdith}, which is not under 'label_words'"),
    ],
)
def test_variant_mistakes_are_one_line_before_any_job(variants, message):
    with pytest.raises(cfg.UserError, match=re.escape(message)):
        plan_at("demo", variants=variants)


def test_a_variants_figure_of_a_kind_that_draws_few_curves_is_one_line():
    figure = {"kind": "alignments", "variants": True, "title": "t", "caption": "c"}
    with pytest.raises(
        cfg.UserError, match=r"config: figures\.mine draws every variant and its baseline \(variants: true\); a alignments figure draws at most 1\."
    ):
        plan_at("demo", figures={"mine": figure})


@pytest.fixture(scope="module")
def multi30k() -> Plan:
    return plan_at("multi30k")


def test_multi30k_runs_both_directions_from_the_datasets_files_with_the_tasks_preprocessing(multi30k):
    """Its own table of archives (raw.githubusercontent.com at a fixed commit, with checksums), lowercasing and
    punctuation normalisation before Moses, joint BPE codes per pair, case-insensitive sacreBLEU."""
    assert multi30k.pairs == ["en-de", "en-fr"] and not multi30k.demo and multi30k.bpe
    train = multi30k.corpora["en-de"]["train"]
    assert [p.archive for p in train.src + train.tgt] == ["train.en", "train.de"]
    url = multi30k.sources["archives"]["train.de"]["url"]
    assert url.startswith("https://raw.githubusercontent.com/multi30k/dataset/a3d2e0d26b56f3846f66a952536ffed4e401d05a/") and url.endswith("/train.de.gz")
    inputs = RuleInputs(multi30k)
    flags = inputs.tokenizer_flags(SimpleNamespace(pair="en-de", split="train"))
    assert flags == "--lowercase --normalize-punctuation"  # the scale's settings over en-de's own (-a)
    assert inputs.download_flags(SimpleNamespace(file="train.de.gz")).startswith(f"--url {url} --checksum sha256:726e39b2")
    files = inputs.vocab_files("en-fr")
    assert files["src_bpe"] == files["tgt_bpe"] == "results/data/vocab/en-fr/bpe.joint.codes"
    assert inputs.bpe_text(SimpleNamespace(pair="en-fr", codes="joint")) == ["results/data/selected/en-fr/train.en", "results/data/selected/en-fr/train.fr"]
    score = inputs.score_flags(SimpleNamespace(score="multi30k-rnnsearch-fr"), SimpleNamespace(keys=lambda: []))
    assert "--lowercase" in score and "--lang fr" in score
    assert "--lowercase" not in RuleInputs(plan_at("paper")).score_flags(SimpleNamespace(score="luong-base"), SimpleNamespace(keys=lambda: []))


def test_a_download_dir_may_hold_some_archives_or_none_and_every_download_looks_there(tmp_path):
    """An empty folder is a download.dir too: each archive not in it is then fetched from its URL (docs/data.md)."""
    inputs = RuleInputs(plan_at("multi30k", download={"dir": str(tmp_path)}))
    assert inputs.download_origin == f"--offline-dir {tmp_path}"


def test_the_multi30k_table_scores_val_and_both_test_sets_of_each_pair(multi30k):
    """A splits table: every run of a row reads its score file on each split (val as `test-val`) and its meta.json."""
    assert multi30k.table_splits == {"multi30k": ["test-val", "test", "test-test_2017_flickr"]}
    assert multi30k.named_test_splits == ["test-test_2017_flickr", "test-val"]
    spec = Reports(multi30k).table_spec("multi30k")
    assert spec["splits"] == ["val", "test_2016_flickr", "test_2017_flickr"] and spec["tolerance"] == 1.0
    search = next(row for row in spec["rows"] if row["system"] == "multi30k-rnnsearch-de")
    assert search["splits"] == {
        "val": "results/scores/test-val/multi30k-rnnsearch-de.json",
        "test_2016_flickr": "results/scores/multi30k-rnnsearch-de.json",
        "test_2017_flickr": "results/scores/test-test_2017_flickr/multi30k-rnnsearch-de.json",
    }
    assert [s["seed"] for s in search["seeds"]] == [1, 2, 3] and search["published"]["test_2016_flickr"] == 39.0
    assert spec["data"].startswith("Data: this run (multi30k scale) en→de on Multi30k task 1 (the dataset's own files), trained on train, validated on val")
    assert "; en→fr on Multi30k task 1" in spec["data"]
    inputs = Reports(multi30k).table_inputs(SimpleNamespace(table="multi30k"))
    assert "results/scores/test-val/multi30k-rnnsearch-de.seed3.json" in inputs and "results/models/multi30k-rnnencdec-fr/meta.json" in inputs


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"tables": {"multi30k": {"splits": ["val", "test_2016_flickr", "test_2017_flickr", "test_2017_mscoco"]}}},
            r"tables.multi30k.splits names test_2017_mscoco, but the dev and test sets of en-de at scale 'multi30k' are val, test_2016_flickr, test_2017_flickr",
        ),
        ({"tables": {"multi30k": {"kind": "systems"}}}, r"tables.multi30k is a systems table; `splits` .* goes with kind splits and only there"),
        (
            {"tables": {"bahdanau2014_table1": {"rows": [{"system": "rnnsearch-50", "published": {"al": 1.0}}]}}},
            r"a row of tables.bahdanau2014_table1 has a published 'al'; a bleu table takes all, nounk",
        ),
    ],
)
def test_splits_table_mistakes_are_one_line(change, message):
    with pytest.raises(cfg.UserError, match=message):
        plan_at("multi30k", **change)
