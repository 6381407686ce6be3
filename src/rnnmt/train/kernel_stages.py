"""The stages after the loops as single kernels (`train.recurrence: kernels`): the output softmax with its NLL
(nll.py's OutputNLL) and the clipped optimiser steps (update.py's KernelStep).

Each is a stage as recurrence/kernels/stages.py declares them: named operands, a torch reference and a Triton
launch (triton_update.py). The references call the code they stand in for where it has a home: the clipping is
optim.py's rule. The steps' arithmetic is torch.optim's, which update.py checks against the run's own optimiser
before a run relies on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rnnmt.recurrence.kernels.stages import Stage, stage, widened
from rnnmt.train.optim import clipped


@stage("output_softmax")
class OutputSoftmax(Stage):
    """Per row of logits [N, V] (+ bias): nll = log Σ exp − the target's logit; the row becomes P − Y, the softmax
    minus the one-hot target, in the logits' dtype (nll.py's OutputNLL; its reference is the `fused` path's)."""

    logits: Tensor
    bias: Tensor | None
    target: Tensor
    nll: Tensor

    def reference(self) -> None:
        x = widened(self.logits)  # a copy under autocast, else the logits themselves
        if self.bias is not None:
            x.add_(widened(self.bias))
        top = x.amax(dim=1)
        picked = x.gather(1, self.target.unsqueeze(1)).squeeze(1)
        x.sub_(top.unsqueeze(1)).exp_()  # unnormalised softmax
        total = x.sum(dim=1)
        torch.log(total, out=self.nll).add_(top).sub_(picked)
        x.div_(total.unsqueeze(1)).scatter_add_(1, self.target.unsqueeze(1), x.new_full((x.shape[0], 1), -1.0))
        if x is not self.logits:
            self.logits.copy_(x)

    def launch(self) -> None:
        from rnnmt.train import triton_update

        triton_update.output_softmax(self)


@stage("adadelta_update")
class AdadeltaUpdate(Stage):
    """The clipped gradient g (optim.clipped), then Adadelta as torch.optim.Adadelta computes it: E[g²] ← ρE[g²] +
    (1−ρ)g², Δ = √(E[Δ²] + ε) / √(E[g²] + ε) · g, E[Δ²] ← ρE[Δ²] + (1−ρ)Δ², param ← param − lr·Δ."""

    param: Tensor
    grad: Tensor
    square_avg: Tensor
    acc_delta: Tensor
    norm: Tensor
    lr: float
    max_norm: float
    rho: float
    eps: float

    def reference(self) -> None:
        g = clipped(self.param, self.grad, self.norm, self.max_norm)
        self.square_avg.mul_(self.rho).addcmul_(g, g, value=1 - self.rho)
        delta = self.acc_delta.add(self.eps).sqrt_().div_(self.square_avg.add(self.eps).sqrt_()).mul_(g)
        self.acc_delta.mul_(self.rho).addcmul_(delta, delta, value=1 - self.rho)
        self.param.add_(delta, alpha=-self.lr)

    def launch(self) -> None:
        from rnnmt.train import triton_update

        triton_update.adadelta_update(self)


@stage("sgd_update")
class SGDUpdate(Stage):
    """The clipped gradient g (optim.clipped), then plain SGD: param ← param − lr·g."""

    param: Tensor
    grad: Tensor
    norm: Tensor
    lr: float
    max_norm: float

    def reference(self) -> None:
        self.param.add_(clipped(self.param, self.grad, self.norm, self.max_norm), alpha=-self.lr)

    def launch(self) -> None:
        from rnnmt.train import triton_update

        triton_update.sgd_update(self)
