"""Triton kernels of the stages outside the recurrent loops (stages.py): the output layer's softmax with its
NLL and gradient, and the clipped parameter update (Adadelta, SGD), each one pass over its memory."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from rnnmt.recurrence.kernels.triton_common import present_or
from rnnmt.train import optim

# Vocabulary columns per step of a softmax row; elements per program of an update.
VOCAB_BLOCK = 2048
UPDATE_BLOCK = 2048


@triton.jit
def _logits(base, bias, v, V, HAS_BIAS: tl.constexpr):
    """A tile of a row's logits in float32 (+ bias); −inf beyond the vocabulary."""
    x = tl.load(base + v, mask=v < V, other=float("-inf")).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias + v, mask=v < V, other=0.0).to(tl.float32)
    return x


@triton.jit
def _output_softmax(logits, stride, bias, target, nll, V, HAS_BIAS: tl.constexpr, BLOCK_V: tl.constexpr):
    row = tl.program_id(0)
    base = logits + row.to(tl.int64) * stride
    top = tl.full([BLOCK_V], float("-inf"), tl.float32)
    for v0 in range(0, V, BLOCK_V):
        top = tl.maximum(top, _logits(base, bias, v0 + tl.arange(0, BLOCK_V), V, HAS_BIAS))
    top_row = tl.max(top, axis=0)
    total = tl.zeros([BLOCK_V], tl.float32)
    for v0 in range(0, V, BLOCK_V):
        total += tl.exp(_logits(base, bias, v0 + tl.arange(0, BLOCK_V), V, HAS_BIAS) - top_row)
    total_row = tl.sum(total, axis=0)
    y = tl.load(target + row)
    picked = tl.load(base + y).to(tl.float32)
    if HAS_BIAS:
        picked += tl.load(bias + y).to(tl.float32)
    tl.store(nll + row, tl.log(total_row) + top_row - picked)
    for v0 in range(0, V, BLOCK_V):
        v = v0 + tl.arange(0, BLOCK_V)
        p = tl.math.div_rn(tl.exp(_logits(base, bias, v, V, HAS_BIAS) - top_row), total_row)
        p = tl.where(v == y, p - 1.0, p)
        tl.store(base + v, p.to(logits.dtype.element_ty), mask=v < V)


def output_softmax(s: Any) -> None:
    """The `output_softmax` stage (stages.py) on its operands `s`."""
    rows, V = s.logits.shape
    _output_softmax[(rows,)](
        s.logits, s.logits.stride(0), present_or(s.bias, s.logits), s.target, s.nll, V, HAS_BIAS=s.bias is not None, BLOCK_V=VOCAB_BLOCK, num_warps=8
    )


@triton.jit
def _clipped(p, g, norm, max_norm, nonfinite_scale):
    """optim.clipped on one gradient tile."""
    factor = tl.where(norm >= max_norm, tl.math.div_rn(max_norm, norm), 1.0)
    finite = (norm == norm) & (tl.abs(norm) != float("inf"))
    return tl.where(finite, g * factor, nonfinite_scale * p)


@triton.jit
def _adadelta_update(param, grad, square_avg, acc_delta, norm_ptr, n, lr, max_norm, nonfinite_scale, rho, one_minus_rho, eps, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    p = tl.load(param + i, mask=m, other=0.0)
    g = _clipped(p, tl.load(grad + i, mask=m, other=0.0), tl.load(norm_ptr), max_norm, nonfinite_scale)
    acc = tl.load(acc_delta + i, mask=m, other=0.0)
    sq = tl.load(square_avg + i, mask=m, other=0.0) * rho + one_minus_rho * (g * g)
    delta = tl.math.div_rn(tl.math.sqrt_rn(acc + eps), tl.math.sqrt_rn(sq + eps)) * g
    acc = acc * rho + one_minus_rho * (delta * delta)
    tl.store(square_avg + i, sq, mask=m)
    tl.store(acc_delta + i, acc, mask=m)
    tl.store(param + i, p - lr * delta, mask=m)


def adadelta_update(s: Any) -> None:
    """The `adadelta_update` stage (stages.py) on its operands `s`."""
    n = s.param.numel()
    _adadelta_update[(triton.cdiv(n, UPDATE_BLOCK),)](
        s.param, s.grad, s.square_avg, s.acc_delta, s.norm, n, s.lr, s.max_norm, optim.NONFINITE_SCALE, s.rho, 1 - s.rho, s.eps, BLOCK=UPDATE_BLOCK
    )


@triton.jit
def _sgd_update(param, grad, norm_ptr, n, lr, max_norm, nonfinite_scale, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    p = tl.load(param + i, mask=m, other=0.0)
    g = _clipped(p, tl.load(grad + i, mask=m, other=0.0), tl.load(norm_ptr), max_norm, nonfinite_scale)
    tl.store(param + i, p - lr * g, mask=m)


def sgd_update(s: Any) -> None:
    """The `sgd_update` stage (stages.py) on its operands `s`."""
    n = s.param.numel()
    _sgd_update[(triton.cdiv(n, UPDATE_BLOCK),)](s.param, s.grad, s.norm, n, s.lr, s.max_norm, optim.NONFINITE_SCALE, BLOCK=UPDATE_BLOCK)
