"""Initialisation schemes (paper-spec §1.7, §4.5), filled in by rules the modules themselves declare.

A module that owns parameters (its own, or those of the torch layers it holds) says how each is drawn
in `init_rules(scheme)`: parameter names relative to the module, mapped to rules. A scheme supplies the
rules of ordinary weights, biases and recurrent matrices; a module applies its own where a scheme treats
its parameters specially (GroundHog's alignment model, attention.py). `initialise` gathers every module's
rules and fills the parameters in the model's own order, so a seed always gives the same model; a
parameter that no module declares, or that two declare, is an error, never a default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor, nn

Rule = Callable[[Tensor], object]  # fills a parameter in place


def zeros(p: Tensor) -> None:
    p.zero_()


def ones(p: Tensor) -> None:
    p.fill_(1.0)


def normal(std: float) -> Rule:
    return lambda p: p.normal_(0.0, std)


def uniform(limit: float) -> Rule:
    return lambda p: p.uniform_(-limit, limit)


def fan_in_normal(weight: Tensor) -> None:
    """N(0, 1/n_in) for a torch weight [out, in], each row's n_in inputs (nmtpy's `norm_weight(nin, nout,
    scale="xavier")`, nmtutils.py l. 66–77)."""
    weight.normal_(0.0, weight.shape[1] ** -0.5)


def vocabulary_normal(weight: Tensor) -> None:
    """N(0, 1/V) for an embedding table [V, E]: nmtpy draws it as `norm_weight(n_words, embedding_dim)`, so
    its n_in is the vocabulary (models/attention.py, `init_params`)."""
    weight.normal_(0.0, weight.shape[0] ** -0.5)


def orthogonal_blocks(weight: Tensor) -> None:
    """Each square block of a stacked recurrent matrix [U_z; U_r] gets its own random orthogonal init."""
    n = weight.shape[1]
    for block in weight.split(n, dim=0):
        nn.init.orthogonal_(block)


@dataclass(frozen=True)
class Scheme:
    """A scheme's name and its rules for ordinary weight matrices, biases, recurrent matrices and embedding tables."""

    name: str
    weight: Rule
    bias: Rule
    recurrent: Rule
    embedding: Rule


def groundhog(cfg: dict[str, Any]) -> Scheme:
    """GroundHog's: weights N(0, 0.01²), recurrent matrices orthogonal, biases 0 (experiments/nmt/state.py:
    `weight_init_fn = 'sample_weights_classic'`, `weight_scale = 0.01`, `rec_weight_init_fn =
    'sample_weights_orth'`, `bias = 0.`); the alignment model's own rules are in attention.py."""
    draw = normal(1e-2)
    return Scheme("groundhog", draw, zeros, orthogonal_blocks, draw)


def uniform_scheme(cfg: dict[str, Any]) -> Scheme:
    """U(−0.1, 0.1) weights (the common NMT default), recurrent matrices orthogonal, biases 0."""
    draw = uniform(0.1)
    return Scheme("uniform", draw, zeros, orthogonal_blocks, draw)


def nmtpy(cfg: dict[str, Any]) -> Scheme:
    """nmtpy's `weight_init: xavier` (lium-lst/nmtpy nmtutils.py l. 58–83, layers.py): weights N(0, 1/n_in),
    embedding tables N(0, 1/V), recurrent matrices orthogonal, biases 0. nmtpy also draws a square non-recurrent
    matrix orthogonal (its context projection inside the attention, 2H × 2H); no RNNsearch matrix is that one."""
    return Scheme("nmtpy", fan_in_normal, zeros, orthogonal_blocks, vocabulary_normal)


def luong(cfg: dict[str, Any]) -> Scheme:
    """Luong et al.: every parameter uniform in [−r, r], r = init_range (0.1 in the paper, §4.5; nmt.matlab's
    trainLSTM.m draws every matrix with `initMatrixRange(params.initRange, …)`)."""
    draw = uniform(cfg["init_range"])
    return Scheme("luong", draw, draw, draw, draw)


SCHEMES: dict[str, Callable[[dict[str, Any]], Scheme]] = {"groundhog": groundhog, "uniform": uniform_scheme, "nmtpy": nmtpy, "luong": luong}


@runtime_checkable
class Initialised(Protocol):
    """A module that declares how its parameters are drawn: names relative to the module -> rules."""

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]: ...


def prefixed(prefix: str, rules: Mapping[str, Rule]) -> dict[str, Rule]:
    """The rules of a child module's parameters, named from its parent."""
    return {f"{prefix}.{name}": rule for name, rule in rules.items()}


def linear_rules(layers: Mapping[str, nn.Module], scheme: Scheme) -> dict[str, Rule]:
    """Each nn.Linear's weight as a weight and its bias, if it has one, as a bias."""
    rules = {}
    for name, layer in layers.items():
        rules[f"{name}.weight"] = scheme.weight
        if layer.bias is not None:
            rules[f"{name}.bias"] = scheme.bias
    return rules


def _declared_rules(model: nn.Module, scheme: Scheme) -> dict[str, Rule]:
    """Every rule the modules of `model` declare, by full parameter name."""
    rules: dict[str, Rule] = {}
    for prefix, module in model.named_modules():
        if not isinstance(module, Initialised):
            continue
        for name, rule in module.init_rules(scheme).items():
            full = f"{prefix}.{name}" if prefix else name
            if full in rules:
                raise LookupError(f"Two modules declare how {full} is initialised.")
            rules[full] = rule
    return rules


def initialise(model: nn.Module, scheme: Scheme) -> None:
    """Fill every parameter of `model` by the rule its module declares under `scheme`, in parameter order."""
    rules = _declared_rules(model, scheme)
    names = [name for name, _ in model.named_parameters()]
    if undeclared := [name for name in names if name not in rules]:
        raise LookupError(f"No module declares how {', '.join(undeclared)} is initialised under {scheme.name!r} (init_rules).")
    if unknown := sorted(rules.keys() - set(names)):
        raise LookupError(f"Init rules name {', '.join(unknown)}, which the model does not have.")
    with torch.no_grad():
        for name, p in model.named_parameters():
            rules[name](p)
