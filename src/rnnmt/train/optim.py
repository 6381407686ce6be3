"""Optimisers and gradient clipping (paper-spec §1.8); the choice is data in the system config."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn

from rnnmt.errors import UserError


def build_optimizer(params: Iterable[nn.Parameter], cfg: dict[str, Any]) -> torch.optim.Optimizer:
    """Adadelta (the papers; rho must be 0.95, not torch's 0.9), Adam (the demo) or plain SGD."""
    name = cfg["name"]
    if name == "adadelta":
        return torch.optim.Adadelta(params, lr=cfg.get("lr", 1.0), rho=cfg.get("rho", 0.95), eps=cfg.get("eps", 1e-6))
    if name == "adam":
        return torch.optim.Adam(params, lr=cfg.get("lr", 1e-3))
    if name == "sgd":
        return torch.optim.SGD(params, lr=cfg.get("lr", 1.0))
    raise UserError(f"train.optimizer.name is {name!r}; expected adadelta, adam or sgd.")


def clip_gradients(params: list[nn.Parameter], max_norm: float) -> float:
    """GroundHog's rule: rescale to max_norm when the global norm reaches it; a NaN/inf gradient becomes 0.1·p."""
    grads = [p.grad for p in params if p.grad is not None]
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))
    if not torch.isfinite(norm):
        for p in params:
            if p.grad is not None:
                p.grad.copy_(0.1 * p.detach())
    elif norm >= max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    return float(norm)
