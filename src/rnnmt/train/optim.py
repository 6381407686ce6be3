"""Optimisers and gradient clipping (paper-spec §1.8); the choice is data in the system config.

`build_optimizer` and the clipping rule (`clip_factor`, NONFINITE_SCALE) are the update's one home: update.py checks
every fast form of the step (the `kernels` path's one stage per parameter) against them before a run relies on it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError


def build_optimizer(params: Iterable[nn.Parameter], cfg: dict[str, Any]) -> torch.optim.Optimizer:
    """Adadelta (the papers; rho must be 0.95, not torch's 0.9), Adam (the demo) or plain SGD."""
    name = cfg["name"]
    if name not in DEFAULT_LR:
        raise UserError(f"train.optimizer.name is {name!r}; expected adadelta, adam or sgd.")
    lr = cfg.get("lr", DEFAULT_LR[name])
    # foreach (Adadelta; torch's choice on a GPU) and fused: a few kernels per update instead of several per
    # parameter; the same arithmetic (bit-identical in our checks).
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=lr, rho=cfg.get("rho", 0.95), eps=cfg.get("eps", 1e-6), foreach=True)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, fused=True)
    return torch.optim.SGD(params, lr=lr, fused=True)


DEFAULT_LR = {"adadelta": 1.0, "adam": 1e-3, "sgd": 1.0}


def learning_rate(optimizer: dict[str, Any], decay: dict[str, Any] | None, epoch: int) -> float:
    """The learning rate in 0-based epoch `epoch`: constant, or (Luong) multiplied by `factor` once per
    epoch after `after_epoch` epochs ("after 5 epochs, we begin to halve the learning rate every epoch")."""
    lr = optimizer.get("lr", DEFAULT_LR[optimizer["name"]])
    if decay is None:
        return lr
    return lr * decay["factor"] ** max(0, epoch + 1 - decay["after_epoch"])


def global_norm(grads: list[Tensor]) -> Tensor:
    """The L2 norm of all `grads` together."""
    return torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))


# GroundHog's clipping rule is these two, which every form of it reads (clip_gradients, `clipped` for the fast steps'
# references; the Triton kernel is checked against those): the rescaling `clip_factor`, and where the gradients'
# norm is NaN or infinite, each gradient replaced by this share of its parameter.
NONFINITE_SCALE = 0.1


def clip_factor(norm: Tensor, max_norm: float) -> Tensor:
    """GroundHog's rescaling of every gradient: max_norm / norm where the norm reaches max_norm, else 1."""
    return torch.where(norm >= max_norm, max_norm / norm, torch.ones_like(norm))


def clipped(param: Tensor, grad: Tensor, norm: Tensor, max_norm: float) -> Tensor:
    """GroundHog's clipping of one gradient, given the norm of all: grad · clip_factor, or NONFINITE_SCALE · param
    where the norm is not finite (the update stages' references, kernel_stages.py)."""
    return torch.where(torch.isfinite(norm), grad * clip_factor(norm, max_norm), NONFINITE_SCALE * param)


def clip_gradients(params: list[nn.Parameter], max_norm: float, norm_params: list[nn.Parameter] | None = None, *, on_device: bool = False) -> Tensor:
    """Every gradient clipped in place by the rule (`clip_factor`, NONFINITE_SCALE), with the norm taken over
    `norm_params` (default: all; Luong leaves out the embeddings). Returns the norm.

    `on_device` decides both cases on the device, without the host reading the norm (a GPU then need not wait): the
    same arithmetic, at the cost of passes over the gradients that the host's decision saves on a CPU (a factor of
    1 changes nothing, and a finite norm needs no fallback).
    """
    with_grad = [p for p in params if p.grad is not None]
    grads = [p.grad for p in with_grad]
    measured = [p.grad for p in (params if norm_params is None else norm_params) if p.grad is not None]
    norm = global_norm(measured)
    factor = clip_factor(norm, max_norm)
    if on_device:
        finite = torch.isfinite(norm)
        torch._foreach_mul_(grads, factor)
        for g, fallback in zip(grads, torch._foreach_mul([p.detach() for p in with_grad], NONFINITE_SCALE)):
            torch.where(finite, g, fallback, out=g)
    elif not torch.isfinite(norm):
        for g, p in zip(grads, with_grad):
            g.copy_(NONFINITE_SCALE * p.detach())
    elif float(factor) != 1.0:
        for g in grads:
            g.mul_(factor)
    return norm
