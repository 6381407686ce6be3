"""Modules declare their own initialisation; the attention registry is what build_model accepts."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from rnnmt.errors import UserError
from rnnmt.models.attention import ATTENTIONS, AdditiveAttention
from rnnmt.models.build import build_model
from rnnmt.models.encoders import Embedding
from rnnmt.models.initialisation import SCHEMES, Rule, Scheme, initialise

from conftest import tiny_luong_config, tiny_model_config

GROUNDHOG = SCHEMES["groundhog"]({})


class ScaledAttention(AdditiveAttention):
    """A new Bahdanau-family attention that forgets to declare how its extra parameter is initialised."""

    def __init__(self, query_size: int, key_size: int, hidden: int) -> None:
        super().__init__(query_size, key_size, hidden)
        self.scale = nn.Parameter(torch.ones(1))


class Undeclared(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(2, 2)


class Declaring(nn.Module):
    """Declares its embedding's weight, which the embedding declares too, and a parameter it lacks."""

    def __init__(self, rules: dict[str, Rule]) -> None:
        super().__init__()
        self.embed = Embedding(3, 2)
        self.rules = rules

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        return self.rules


def test_a_registered_attention_is_built_and_an_undeclared_parameter_fails_loudly(monkeypatch):
    monkeypatch.setitem(ATTENTIONS, "scaled", ScaledAttention)
    with pytest.raises(LookupError, match=r"No module declares how decoder\.attention\.scale is initialised under 'uniform'"):
        build_model(tiny_model_config(attention="scaled"), 20, 20)


def test_parameters_of_a_module_without_rules_fail_loudly():
    model = build_model(tiny_model_config(), 20, 20)
    model.decoder.extra = Undeclared()
    with pytest.raises(LookupError, match=r"decoder\.extra\.gate\.weight, decoder\.extra\.gate\.bias"):
        initialise(model, GROUNDHOG)


def test_rules_must_name_each_parameter_once_and_only_real_ones():
    with pytest.raises(LookupError, match=r"Two modules declare how embed\.weight"):
        initialise(Declaring({"embed.weight": torch.nn.init.zeros_}), GROUNDHOG)
    with pytest.raises(LookupError, match="Init rules name gate.weight, which the model does not have"):
        initialise(Declaring({"gate.weight": torch.nn.init.zeros_}), GROUNDHOG)


def test_allowed_attentions_are_the_registry():
    with pytest.raises(UserError, match=r"^model\.attention is 'global', but a 'gru' decoder takes additive, none\.$"):
        build_model(tiny_model_config(attention="global"), 20, 20)


@pytest.mark.parametrize("scheme", list(SCHEMES))
@pytest.mark.parametrize(
    "config",
    [
        tiny_model_config(),
        tiny_model_config("gru", "none"),
        tiny_luong_config(score="concat"),
        tiny_luong_config("local-p", bias=True),
        tiny_luong_config("none", feed_input=False),
    ],
)
def test_every_model_declares_every_scheme(config, scheme):
    build_model({**config, "init": scheme, "init_range": 0.1}, 20, 20)


def test_the_config_schema_offers_exactly_the_registered_choices():
    """The schema's enums restate the registries so that a typo stops before any job; this keeps them equal."""
    from pathlib import Path

    import yaml

    from rnnmt.models.attention import ATTENTIONS, LUONG_KINDS, LUONG_SCORES
    from rnnmt.models.encoders import ENCODERS
    from rnnmt.models.initialisation import SCHEMES

    schema = yaml.safe_load((Path(__file__).resolve().parents[1] / "workflow" / "schemas" / "config.schema.yaml").read_text())
    model = schema["$defs"]["model"]["properties"]
    assert set(model["attention"]["enum"]) == set(ATTENTIONS) | set(LUONG_KINDS)
    assert set(model["score"]["enum"]) == set(LUONG_SCORES)
    assert set(model["init"]["enum"]) == set(SCHEMES)
    assert set(model["encoder"]["enum"]) == set(ENCODERS) | {"lstm"}
