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
    assert c["pairs"]["en-fr"]["tokenizer"] == {"escape": True, "aggressive_dash_splits": False}
    assert c["scales"]["demo"]["selection"]["method"] == "none"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda c: c["scales"]["demo"]["train"].update(updatez=3), "unknown key 'scales.demo.train.updatez'"),
        (lambda c: c.update(evalution={}), "unknown key 'evalution'"),
        (lambda c: c["systems"]["rnnsearch-50"]["model"].update(attention="dot-product"), "systems.rnnsearch-50.model.attention"),
        (lambda c: c.update(scale="huge"), "scale 'huge' is not one of the presets"),
        (lambda c: c["systems"]["rnnsearch-30"].update(pair="en-xx"), "systems.rnnsearch-30.pair 'en-xx'"),
        (lambda c: c["figures"]["bahdanau2014_fig2"].update(table="table9"), "figures.bahdanau2014_fig2.table 'table9'"),
        (lambda c: c["figures"]["bahdanau2014_fig3"].update(system="rnnsearch-5O"), "figures.bahdanau2014_fig3.system"),
        (lambda c: c["tables"]["bahdanau2014_table1"]["check"].update(search="rnnsearch50"), "check.search 'rnnsearch50'"),
        (lambda c: c["scales"]["demo"]["vocab"].pop("size"), "'size' is a required property"),
        (lambda c: c["scales"]["paper"]["selection"].update(method="axelrod") or c.update(scale="paper"), "selects data with 'axelrod'"),
        (lambda c: c["scales"]["sample"]["corpora"].update(fr={"set": "x"}), "corpora.fr is not a pair"),
    ],
)
def test_mistakes_are_one_line_naming_the_key(edit, expected):
    c = raw_config()
    edit(c)
    with pytest.raises(UserError) as err:
        cfg.validate(c, SCHEMA)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_system_config_merges_scale_system_and_overrides():
    c = cfg.validate(raw_config(), SCHEMA)
    demo = cfg.system_config(c, "rnnsearch-30")
    assert demo["model"]["encoder"] == "bigru" and demo["model"]["hidden"] == c["scales"]["demo"]["model"]["hidden"]
    assert demo["train"]["max_len"] == 30 and demo["train"]["optimizer"]["name"] == "adam"
    c["scale"] = "paper"
    paper = cfg.system_config(c, "rnnsearch-30")
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
