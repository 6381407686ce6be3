"""Optimisers and gradient clipping (paper-spec §1.8); the choice is data in the system config.

`build_optimizer` and the clipping rule (`Clipping`, NONFINITE_SCALE) are the update's one home: update.py checks
every fast form of the step (the `kernels` path's one stage per parameter) against them before a run relies on it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
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


def l2_parameters(params: Iterable[nn.Parameter]) -> list[nn.Parameter]:
    """The parameters an L2 penalty covers: the weight matrices and embeddings, not the biases (nmtpy's
    get_l2_weight_decay, skip_bias: lium-lst/nmtpy dc0a161, nmtpy/models/basemodel.py lines 134-143)."""
    return [p for p in params if p.dim() > 1]


def add_l2_gradient(params: list[nn.Parameter], coefficient: float) -> None:
    """The gradient of `coefficient` · Σ‖W‖² over `params` (`l2_parameters`) added to theirs: 2·coefficient·W.

    nmtpy adds decay_c · Σ W² to the batch's cost before it differentiates and clips (basemodel.py build_optimizer,
    lines 157-189; bin/nmt-train lines 225-226), so the term's gradient is in the norm the clipping measures; here it
    joins the gradients after backward and before clipping, the same sum without a graph of its own."""
    if not coefficient:
        return
    with_grad = [p for p in params if p.grad is not None]
    if with_grad:
        torch._foreach_add_([p.grad for p in with_grad], [p.detach() for p in with_grad], alpha=2.0 * coefficient)


# GroundHog's clipping rule (paper-spec §1.8), stated once in `Clipping`: where the gradients' norm reaches max_norm,
# every gradient is rescaled to it; where the norm is NaN or infinite, each gradient is replaced by this share of its
# parameter.
NONFINITE_SCALE = 0.1


@dataclass(frozen=True)
class Clipping:
    """GroundHog's clipping rule for one update's gradients, whose norm (before clipping) is `norm`. Every form of
    the update reads it: clip_gradients (`clip_`, or on the host the part the norm calls for), the kernel steps'
    references (`clip`, kernel_stages.py; their Triton kernels are checked against these), and the metrics, which
    record `clipped`. Its tensors stay on the norm's device, each computed once: the step and the metrics read the
    same."""

    norm: Tensor
    max_norm: float

    @cached_property
    def rescaled(self) -> Tensor:
        """Whether the norm reaches max_norm (so every gradient is rescaled to it)."""
        return self.norm >= self.max_norm

    @cached_property
    def factor(self) -> Tensor:
        """The rescaling of every gradient: max_norm / norm where the norm reaches max_norm, else 1."""
        return torch.where(self.rescaled, self.max_norm / self.norm, torch.ones_like(self.norm))

    @cached_property
    def finite(self) -> Tensor:
        """Whether the norm is finite; where it is not, every gradient is replaced (`replacements`)."""
        return torch.isfinite(self.norm)

    @property
    def clipped(self) -> Tensor:
        """Whether the rule changed the gradients: rescaled, or replaced."""
        return self.rescaled | ~self.finite

    def replacements(self, params: list[Tensor]) -> list[Tensor]:
        """Each parameter's gradient where the norm is not finite: NONFINITE_SCALE · the parameter."""
        return torch._foreach_mul(params, NONFINITE_SCALE)

    def clip_(self, params: list[Tensor], grads: list[Tensor]) -> None:
        """`grads` (of `params`) as the rule makes them, in place, decided on the device: a few passes over them
        (multi-tensor kernels on a GPU) whatever the norm, without the host reading it."""
        torch._foreach_mul_(grads, self.factor)
        for g, replacement in zip(grads, self.replacements(params)):
            torch.where(self.finite, g, replacement, out=g)

    def clip(self, param: Tensor, grad: Tensor) -> Tensor:
        """One gradient as the rule makes it, in a new tensor (the kernel steps' references)."""
        clipped = grad.clone()
        self.clip_([param], [clipped])
        return clipped


def clip_gradients(params: list[nn.Parameter], max_norm: float, norm_params: list[nn.Parameter] | None = None, *, on_device: bool = False) -> Clipping:
    """Every gradient clipped in place by the rule (`Clipping`), with the norm taken over `norm_params` (default: all;
    Luong leaves out the embeddings). Returns the rule's decision, with the norm before clipping.

    `on_device` decides both cases on the device (`Clipping.clip_`), without the host reading the norm (a GPU then
    need not wait): the same arithmetic, at the cost of passes over the gradients that the host's decision saves on a
    CPU (a factor of 1 changes nothing, and a finite norm needs no replacements).
    """
    with_grad = [p.detach() for p in params if p.grad is not None]
    grads = [p.grad for p in params if p.grad is not None]
    measured = [p.grad for p in (params if norm_params is None else norm_params) if p.grad is not None]
    clipping = Clipping(global_norm(measured), max_norm)
    if on_device:
        clipping.clip_(with_grad, grads)
    elif not clipping.finite:
        for g, replacement in zip(grads, clipping.replacements(with_grad)):
            g.copy_(replacement)
    elif float(clipping.factor) != 1.0:
        for g in grads:
            g.mul_(clipping.factor)
    return clipping
