"""Optimisers and gradient clipping (paper-spec §1.8); the choice is data in the system config."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import Tensor, nn

from rnnmt.errors import UserError
from rnnmt.recurrence.kernels import stages


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


def clip_gradients(params: list[nn.Parameter], max_norm: float, norm_params: list[nn.Parameter] | None = None, *, on_device: bool = False) -> Tensor:
    """GroundHog's rule: rescale all gradients to max_norm when the global norm reaches it; a NaN/inf
    gradient becomes 0.1·p. The norm is taken over `norm_params` (default: all; Luong leaves out the
    embeddings). Returns the norm.

    `on_device` decides both cases on the device, without the host reading the norm (a GPU then need not
    wait): the same arithmetic, with a factor of exactly 1 below max_norm, at the cost of a pass over the
    gradients that the branching form saves on a CPU.
    """
    with_grad = [p for p in params if p.grad is not None]
    grads = [p.grad for p in with_grad]
    measured = [p.grad for p in (params if norm_params is None else norm_params) if p.grad is not None]
    norm = global_norm(measured)
    if on_device:
        finite = torch.isfinite(norm)
        torch._foreach_mul_(grads, torch.where(norm >= max_norm, max_norm / norm, torch.ones_like(norm)))
        for g, fallback in zip(grads, torch._foreach_mul([p.detach() for p in with_grad], 0.1)):
            torch.where(finite, g, fallback, out=g)
    elif not torch.isfinite(norm):
        for p in params:
            if p.grad is not None:
                p.grad.copy_(0.1 * p.detach())
    elif norm >= max_norm:
        for g in grads:
            g.mul_(max_norm / norm)
    return norm


# The optimisers whose clipped step runs as one stage per parameter (recurrence/kernels/stages.py).
KERNEL_STEPS = ("adadelta", "sgd")


def kernel_step(optimizer: torch.optim.Optimizer, norm_params: list[nn.Parameter], max_norm: float) -> Tensor:
    """`clip_gradients(on_device=True)` and `optimizer.step()` in one pass over each parameter (the `kernels`
    recurrence: one Triton kernel per parameter on a GPU, where the two take about eleven). The optimiser's
    state stays torch's (a checkpoint resumes either way). Returns the norm."""
    if not isinstance(optimizer, (torch.optim.Adadelta, torch.optim.SGD)):
        raise ValueError(f"no kernel step for {type(optimizer).__name__}; expected Adadelta or SGD (KERNEL_STEPS)")
    norm = global_norm([p.grad for p in norm_params if p.grad is not None])
    adadelta = isinstance(optimizer, torch.optim.Adadelta)
    for group in optimizer.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            if not adadelta:
                stages.SGDUpdate(param=p.detach(), grad=p.grad, norm=norm, lr=group["lr"], max_norm=max_norm).run()
                continue
            state = optimizer.state[p]
            if not state:  # torch.optim.Adadelta's lazy initialisation
                state.update(step=torch.zeros(()), square_avg=torch.zeros_like(p), acc_delta=torch.zeros_like(p))
            state["step"] += 1
            stages.AdadeltaUpdate(
                param=p.detach(),
                grad=p.grad,
                square_avg=state["square_avg"],
                acc_delta=state["acc_delta"],
                norm=norm,
                lr=group["lr"],
                max_norm=max_norm,
                rho=group["rho"],
                eps=group["eps"],
            ).run()
    return norm
