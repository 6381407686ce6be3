"""config.yaml against its schema: defaults, one-line errors naming the key, resolved systems."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rnnmt import config as cfg
from rnnmt.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "config.schema.yaml"


def raw_config() -> dict:
    return yaml.safe_load((ROOT / "config.yaml").read_text())


def test_shipped_config_is_valid_and_defaults_are_filled():
    c = cfg.validate(raw_config(), SCHEMA)
    assert c["evaluation"]["beam"] == 10
    assert c["pairs"]["en-fr"]["tokenizer"] == {"escape": True, "aggressive_dash_splits": False, "lowercase": False, "normalize_punctuation": False}
    assert c["scales"]["demo"]["selection"]["method"] == "axelrod"
    assert c["scales"]["sample"]["selection"] == {**c["scales"]["sample"]["selection"], "method": "none", "cut": "global", "order": 4}


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["recipes"]["bahdanau2014"]["train"].update(updatez=3), "unknown key 'recipes.bahdanau2014.train.updatez'"),
        (lambda c: c.update(evalution={}), "unknown key 'evalution'"),
        (lambda c: c["systems"]["rnnsearch-50"]["model"].update(attention="dot-product"), "systems.rnnsearch-50.model.attention"),
        (lambda c: c.update(scale="huge"), "scale 'huge' is not one of the scales"),
        (lambda c: c["systems"]["rnnsearch-30"].update(pair="en-xx"), "systems.rnnsearch-30.pair 'en-xx'"),
        (lambda c: c["figures"]["bahdanau2014_fig2"].update(table="table9"), "figures.bahdanau2014_fig2.table 'table9'"),
        (lambda c: c["figures"]["bahdanau2014_fig3"].update(rows=[{"system": "rnnsearch-5O"}]), "figures.bahdanau2014_fig3 names system 'rnnsearch-5O'"),
        (
            lambda c: c["figures"]["luong2015_fig7"]["rows"].append({"system": "luong-ensemble"}),
            "names system 'luong-ensemble', which is not under 'systems' (a trained",
        ),
        (lambda c: c["figures"]["luong2015_fig7"]["rows"].extend([{"system": "luong-base"}] * 2), "has 5 rows; a compared_alignments figure draws at most 4"),
        (lambda c: c["figures"]["bahdanau2014_fig2"].update(kind="histogram"), "key 'figures.bahdanau2014_fig2.kind'"),
        (lambda c: c["tables"]["bahdanau2014_table1"]["check"].update(search="rnnsearch50"), "check.search 'rnnsearch50'"),
        (lambda c: c["scales"]["demo"]["vocab"].pop("size"), "'size' is a required property"),
        (lambda c: c["scales"]["paper"]["selection"].update(method="xenc"), "key 'scales.paper.selection.method'"),
        (lambda c: c["scales"]["sample"]["corpora"].update(fr={"set": "x"}), "corpora.fr is not a pair"),
        # A negative seed used to pass and fail ~20 jobs later inside numpy.
        (lambda c: c["scales"]["demo"]["selection"].update(seed=-1), "key 'scales.demo.selection.seed': -1 is less than the minimum of 0"),
        (lambda c: c.update(seed=2**32), "key 'seed': 4294967296 is greater than the maximum"),
        (lambda c: c["systems"]["rnnsearch-50"].update(seed=-3), "key 'systems.rnnsearch-50.seed'"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(edit, expected):
    c = raw_config()
    edit(c)
    with pytest.raises(UserError) as err:
        cfg.validate(c, SCHEMA)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_system_config_merges_recipe_scale_system_and_overrides():
    c = cfg.validate(raw_config(), SCHEMA)
    demo = cfg.training_settings(c, "rnnsearch-30")
    assert demo["model"]["encoder"] == "bigru" and demo["model"]["hidden"] == c["recipes"]["bahdanau2014"]["overrides"]["demo"]["model"]["hidden"]
    assert demo["train"]["max_len"] == 30 and demo["train"]["optimizer"]["name"] == "adam"
    c["scale"] = "paper"
    paper = cfg.training_settings(c, "rnnsearch-30")
    assert paper["model"]["hidden"] == 1000 and paper["train"]["updates"] == 471000
    assert paper["train"]["optimizer"] == {"name": "adadelta", "lr": 1.0, "rho": 0.95, "eps": 1e-6}
    assert "rnnsearch-50star" in cfg.active_systems(c)
    c["scale"] = "demo"
    assert "rnnsearch-50star" not in cfg.active_systems(c)


class UniqueKeyLoader(yaml.SafeLoader):
    """A YAML loader that rejects a key given twice in one mapping (PyYAML keeps the last silently)."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value]
        duplicates = {k for k in keys if keys.count(k) > 1}
        assert not duplicates, f"duplicate keys {duplicates} at line {node.start_mark.line + 1}"
        return super().construct_mapping(node, deep)


@pytest.mark.parametrize("path", ["config.yaml", "workflow/schemas/config.schema.yaml", "tests/config/tiny.yaml"])
def test_no_key_is_given_twice(path):
    yaml.load((ROOT / path).read_text(), Loader=UniqueKeyLoader)


def test_axelrod_needs_in_domain_text_and_every_per_corpus_share():
    selection = {"cut": "per_corpus", "fractions": {"a": 0.5}}
    with pytest.raises(UserError, match="corpora.en-fr.indomain is empty"):
        cfg.check_axelrod(selection, "en-fr", {"train": ["a"], "indomain": []})
    with pytest.raises(UserError, match="needs selection.fractions for b"):
        cfg.check_axelrod(selection, "en-fr", {"train": ["a", "b"], "indomain": ["a"]})
    cfg.check_axelrod({"cut": "global"}, "en-fr", {"train": ["a", "b"], "indomain": ["a"]})


def test_a_luong_system_takes_its_recipe_then_the_scale_override_then_its_own_settings():
    c = cfg.validate(raw_config(), SCHEMA)
    c["scale"] = "paper"
    local_p = cfg.training_settings(c, "luong-localp-general-feed")
    assert local_p["pair"] == "en-de"
    model, train = local_p["model"], local_p["train"]
    assert (model["layers"], model["hidden"], model["emb"], model["bias"], model["source_eos"]) == (4, 1000, 1000, False, False)
    assert (model["attention"], model["score"], model["feed_input"], model["reverse_source"]) == ("local-p", "general", True, True)
    assert model["dropout"] == 0.2 and train["epochs"] == 12 and train["lr_decay"] == {"after_epoch": 8, "factor": 0.5}
    assert (train["optimizer"], train["loss"], train["clip_norm"], train["batch_size"]) == ({"name": "sgd", "lr": 1.0}, "sentence_mean", 5.0, 128)
    assert "align_hidden" not in model  # nothing leaks from Bahdanau's recipe
    assert cfg.training_settings(c, "luong-base")["train"]["lr_decay"] == {"after_epoch": 5, "factor": 0.5}
    decode = cfg.resolve_system(c, "luong-base")["decode"]
    assert decode == {"beam": 12, "normalize": False, "shrink": False, "min_ratio": 0.5, "max_ratio": 1.5, "stack": 100, "ensemble": "logits"}
    assert cfg.resolve_system(c, "rnnsearch-50")["decode"] == {"beam": 10, "normalize": False}
    # The demo maps En-De onto its own pair and uses the recipe's small demo sizes.
    c["scale"] = "demo"
    demo = cfg.training_settings(c, "luong-localp-general-feed")
    assert demo["pair"] == "en-fr" and demo["model"]["hidden"] == 128 and demo["model"]["dropout"] == 0.0
    assert cfg.active_ensembles(c) == []


def test_selection_can_differ_per_pair():
    c = cfg.validate(raw_config(), SCHEMA)
    c["scale"] = "paper"
    assert cfg.selection_method(c, "en-fr") == "axelrod" and cfg.selection_method(c, "en-de") == "none"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c["systems"]["luong-base"].update(recipe="luong2016"), "recipe 'luong2016' is not under 'recipes'"),
        (lambda c: c["recipes"]["luong2015"].update(base="luong2015-dropout"), "form a cycle"),
        (lambda c: c["ensembles"]["luong-ensemble"]["members"].append("luong-nope"), "ensembles.luong-ensemble names luong-nope"),
        (lambda c: c["ensembles"]["luong-ensemble"]["members"].append("rnnsearch-50"), "translate different pairs"),
        (lambda c: c["claims"].append({"paper": "P", "claim": "x", "a": "luong-nope.unk", "b": "luong-base"}), "claim 'x' names luong-nope"),
        (lambda c: c["claims"].append({"paper": "P", "claim": "y", "a": "rnnsearch-50", "b": "luong-base"}), "different pairs \\(en-de, en-fr\\)"),
    ],
)
def test_recipe_ensemble_and_claim_mistakes_are_one_line_errors(change, message):
    c = raw_config()
    c["scale"] = "paper"
    change(c)
    with pytest.raises(UserError, match=message):
        cfg.validate(c, SCHEMA)


def test_a_table_scores_the_test_set_it_names_or_else_the_pairs_first():
    c = cfg.validate(raw_config(), SCHEMA)
    c["scale"] = "paper"
    en_de = ["newstest2014-filtered", "newstest2015"]
    assert cfg.table_test_set(c, "luong2015_table1", en_de) == "newstest2014-filtered"
    assert cfg.table_test_set(c, "luong2015_table2", en_de) == "newstest2015"
    # set: stanford: the table's second name is that set's copy of newstest2015.
    assert cfg.table_test_set(c, "luong2015_table2", ["stanford-newstest2014", "stanford-newstest2015"]) == "stanford-newstest2015"
    c["scale"] = "demo"
    with pytest.raises(UserError) as err:
        cfg.table_test_set(c, "luong2015_table2", ["demo-test"])
    message = str(err.value)
    assert "tables.luong2015_table2.test names newstest2015 or stanford-newstest2015" in message
    assert "the test sets of en-fr at scale 'demo' are demo-test" in message and "\n" not in message


def test_a_table_row_must_translate_the_tables_pair():
    c = raw_config()
    c["tables"]["luong2015_table2"]["rows"].append({"system": "luong-de-base-reverse"})
    with pytest.raises(UserError, match="tables.luong2015_table2 is on en-de, but its row 'luong-de-base-reverse' translates de-en"):
        cfg.validate(c, SCHEMA)


def test_a_yaml_syntax_error_names_the_file_and_line(tmp_path: Path):
    """Snakemake's own message ("Config file is not valid JSON or YAML") names neither."""
    broken = tmp_path / "config.yaml"
    broken.write_text("scale: demo\nseed: [1\nheldout: [dev]\n")
    with pytest.raises(
        UserError,
        match=rf"^config file {broken} line 3, column 8: expected ',' or '\]', but got ':' \(while parsing a flow sequence at line 2\); fix the YAML there.$",
    ):
        cfg.load(broken, SCHEMA)
    tabs = tmp_path / "tabs.yaml"
    tabs.write_text("scale: demo\nevaluation:\n\tbeam: 3\n")
    with pytest.raises(UserError, match=rf"config file {tabs} line 3, column 1: found character '\\t' that cannot start any token"):
        cfg.read_yaml(tabs)


@pytest.mark.parametrize("text, found", [("", "nothing"), ("- scale: demo\n", "a list")])
def test_a_config_that_is_not_a_mapping_is_named(tmp_path: Path, text: str, found: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=rf"^config file {path} holds {found}; expected a YAML mapping of settings"):
        cfg.load(path, SCHEMA)


MID_SCALE = """
scales:
  mid:
    base: sample
    description: the sample scale's data and systems with 768-unit recurrent layers
    model: {hidden: 768}
"""


def test_a_scale_inherits_its_base_and_changes_only_what_it_says():
    c = cfg.deep_merge(raw_config(), yaml.safe_load(MID_SCALE))
    c["scale"] = "mid"
    c = cfg.validate(c, SCHEMA)
    sample = cfg.deep_merge(raw_config(), {"scale": "sample"})
    sample = cfg.validate(sample, SCHEMA)
    assert cfg.active_systems(c) == cfg.active_systems(sample) and "luong-base" in cfg.active_systems(c)
    assert cfg.active_ensembles(c) == cfg.active_ensembles(sample) == ["luong-ensemble"]
    assert c["scales"]["mid"]["corpora"] == sample["scales"]["sample"]["corpora"]
    for name in cfg.active_systems(c):
        mid, base = cfg.training_settings(c, name), cfg.training_settings(sample, name)
        assert mid["model"]["hidden"] == 768 and base["model"]["hidden"] == 512
        mid["model"]["hidden"] = base["model"]["hidden"]
        assert mid == base, name
        assert cfg.resolve_system(c, name)["decode"] == cfg.resolve_system(sample, name)["decode"]


@pytest.mark.parametrize(
    ("scales", "message"),
    [({"mid": {"base": "smaple"}}, "scales.mid.base 'smaple' is not a scale"), ({"a": {"base": "b"}, "b": {"base": "a"}}, "inherit in a cycle")],
)
def test_scale_inheritance_mistakes_are_one_line_errors(scales, message):
    c = cfg.deep_merge(raw_config(), {"scales": scales})
    with pytest.raises(UserError, match=message):
        cfg.validate(c, SCHEMA)


def test_a_recipe_without_overrides_for_the_active_scale_is_an_error_not_paper_sizes():
    raw = raw_config()
    c = cfg.deep_merge(raw, {"scale": "other", "scales": {"other": raw["scales"]["sample"]}})  # no base: nothing to fall back on
    with pytest.raises(UserError) as err:
        cfg.validate(c, SCHEMA)
    assert "recipe 'bahdanau2014' (of system 'rnnencdec-30') has no overrides for scale 'other'" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_scale_names_only_known_systems():
    c = cfg.deep_merge(raw_config(), {"scales": {"demo": {"systems": ["rnnsearch-50", "rnnsearch-5O"]}}})
    with pytest.raises(UserError, match="scales.demo.systems names rnnsearch-5O, which are not under 'systems'"):
        cfg.validate(c, SCHEMA)


def test_seeds_given_on_the_snakemake_command_line_are_numbers():
    """`snakemake --config 'seeds=[1,2,3]'` parses list items as strings (YAML BaseLoader); they are retyped as YAML would."""
    given = {"seeds": ["1", "2", "3"], "systems": {"rnnsearch-50": {"seeds": ["4"]}}}
    c = cfg.deep_merge(raw_config(), given)
    cfg.type_command_line(c, given)
    c = cfg.validate(c, SCHEMA)
    assert cfg.seeds(c, "rnnencdec-50") == [1, 2, 3] and cfg.seeds(c, "rnnsearch-50") == [4]
    assert c["systems"]["rnnsearch-50"]["recipe"] == "bahdanau2014"  # a nested value retypes only what was given
    bad = cfg.deep_merge(raw_config(), {"seeds": ["one"]})
    cfg.type_command_line(bad, {"seeds": ["one"]})
    with pytest.raises(UserError, match="seeds.0"):
        cfg.validate(bad, SCHEMA)


@pytest.mark.parametrize("top,scale,expected", [(None, "demo", True), (None, "paper", False), (False, "demo", False), (True, "paper", True)])
def test_reproducible_mode_is_the_scales_unless_the_top_level_says(top, scale, expected):
    config = cfg.load(ROOT / "config.yaml", SCHEMA)
    config.update(scale=scale, reproducible=top)
    assert cfg.reproducible(config) is expected
