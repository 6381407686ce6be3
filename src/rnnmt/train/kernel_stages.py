"""The stages after the loops as single kernels (`train.recurrence: kernels`): the output softmax with its NLL
(nll.py's OutputNLL) and the clipped optimiser steps (update.py's KernelStep), each one pass over its memory.

Each is a stage as recurrence/kernels/stages.py declares them: named operands, a torch reference and its Triton
kernel, here. The references call the code they stand in for where it has a home: the clipping is optim.py's rule
(the kernels are given its constant). The steps' arithmetic is torch.optim's, which update.py checks against the
run's own optimiser before a run relies on it.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rnnmt.recurrence.kernels.stages import Stage, launch, stage, widened
from rnnmt.recurrence.kernels.triton_common import cdiv, jit, tl
from rnnmt.train import optim

# Vocabulary columns per step of a softmax row; elements per program of an update.
VOCAB_BLOCK = 2048
UPDATE_BLOCK = 2048


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
        launch(_output_softmax, self, (self.logits.shape[0],), V=self.logits.shape[1], BLOCK_V=VOCAB_BLOCK, num_warps=8)


@jit
def _logits(base, bias, v, V):
    """A tile of a row's logits in float32 (+ bias); −inf beyond the vocabulary."""
    x = tl.load(base + v, mask=v < V, other=float("-inf")).to(tl.float32)
    if bias is not None:
        x += tl.load(bias + v, mask=v < V, other=0.0).to(tl.float32)
    return x


@jit
def _output_softmax(logits, logits_stride, bias, target, nll, V, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    base = logits + row.to(tl.int64) * logits_stride
    top = tl.full([BLOCK_V], float("-inf"), tl.float32)
    for v0 in range(0, V, BLOCK_V):
        top = tl.maximum(top, _logits(base, bias, v0 + tl.arange(0, BLOCK_V), V))
    top_row = tl.max(top, axis=0)
    total = tl.zeros([BLOCK_V], tl.float32)
    for v0 in range(0, V, BLOCK_V):
        total += tl.exp(_logits(base, bias, v0 + tl.arange(0, BLOCK_V), V) - top_row)
    total_row = tl.sum(total, axis=0)
    y = tl.load(target + row)
    picked = tl.load(base + y).to(tl.float32)
    if bias is not None:
        picked += tl.load(bias + y).to(tl.float32)
    tl.store(nll + row, tl.log(total_row) + top_row - picked)
    for v0 in range(0, V, BLOCK_V):
        v = v0 + tl.arange(0, BLOCK_V)
        p = tl.math.div_rn(tl.exp(_logits(base, bias, v, V) - top_row), total_row)
        p = tl.where(v == y, p - 1.0, p)
        tl.store(base + v, p.to(logits.dtype.element_ty), mask=v < V)


@jit
def _clipped(p, g, norm, max_norm, nonfinite_scale):
    """optim.Clipping.clip on one gradient tile: the rule again, in Triton's terms (a kernel cannot call torch), which
    selfcheck.update_stage_differences compares with the stages' references before a run relies on it."""
    factor = tl.where(norm >= max_norm, tl.math.div_rn(max_norm, norm), 1.0)
    finite = (norm == norm) & (tl.abs(norm) != float("inf"))
    return tl.where(finite, g * factor, nonfinite_scale * p)


@stage("adadelta_update")
class AdadeltaUpdate(Stage):
    """The clipped gradient g (optim.Clipping.clip), then Adadelta as torch.optim.Adadelta computes it: E[g²] ← ρE[g²] +
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
        g = optim.Clipping(self.norm, self.max_norm).clip(self.param, self.grad)
        self.square_avg.mul_(self.rho).addcmul_(g, g, value=1 - self.rho)
        delta = self.acc_delta.add(self.eps).sqrt_().div_(self.square_avg.add(self.eps).sqrt_()).mul_(g)
        self.acc_delta.mul_(self.rho).addcmul_(delta, delta, value=1 - self.rho)
        self.param.add_(delta, alpha=-self.lr)

    def launch(self) -> None:
        n = self.param.numel()
        launch(_adadelta_update, self, (cdiv(n, UPDATE_BLOCK),), n=n, nonfinite_scale=optim.NONFINITE_SCALE, one_minus_rho=1 - self.rho, BLOCK=UPDATE_BLOCK)


@jit
def _adadelta_update(param, grad, square_avg, acc_delta, norm, n, lr, max_norm, nonfinite_scale, rho, one_minus_rho, eps, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    p = tl.load(param + i, mask=m, other=0.0)
    g = _clipped(p, tl.load(grad + i, mask=m, other=0.0), tl.load(norm), max_norm, nonfinite_scale)
    acc = tl.load(acc_delta + i, mask=m, other=0.0)
    sq = tl.load(square_avg + i, mask=m, other=0.0) * rho + one_minus_rho * (g * g)
    delta = tl.math.div_rn(tl.math.sqrt_rn(acc + eps), tl.math.sqrt_rn(sq + eps)) * g
    acc = acc * rho + one_minus_rho * (delta * delta)
    tl.store(square_avg + i, sq, mask=m)
    tl.store(acc_delta + i, acc, mask=m)
    tl.store(param + i, p - lr * delta, mask=m)


@stage("sgd_update")
class SGDUpdate(Stage):
    """The clipped gradient g (optim.Clipping.clip), then plain SGD: param ← param − lr·g."""

    param: Tensor
    grad: Tensor
    norm: Tensor
    lr: float
    max_norm: float

    def reference(self) -> None:
        self.param.add_(optim.Clipping(self.norm, self.max_norm).clip(self.param, self.grad), alpha=-self.lr)

    def launch(self) -> None:
        n = self.param.numel()
        launch(_sgd_update, self, (cdiv(n, UPDATE_BLOCK),), n=n, nonfinite_scale=optim.NONFINITE_SCALE, BLOCK=UPDATE_BLOCK)


@jit
def _sgd_update(param, grad, norm, n, lr, max_norm, nonfinite_scale, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    p = tl.load(param + i, mask=m, other=0.0)
    g = _clipped(p, tl.load(grad + i, mask=m, other=0.0), tl.load(norm), max_norm, nonfinite_scale)
    tl.store(param + i, p - lr * g, mask=m)
