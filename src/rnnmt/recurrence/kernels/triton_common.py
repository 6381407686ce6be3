"""What the stages' Triton kernels share: tanh, an attention row's softmax and context and their backward, and the
launch grids.

Every kernel reads its inputs in their own dtype (bfloat16 products, float32 states) and computes in
float32; outputs are written in each output's dtype. 2-D operands are rows with a row stride and
contiguous columns. tanh is written through exp (Triton's interpreter has no tanh), as accurate as torch's.
Triton compiles a kernel at its first launch: on a CUDA device, or on a CPU under TRITON_INTERPRET=1 in the tests
(set before this module is imported: `jit` reads it).
"""

from __future__ import annotations

from typing import Any

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton (macOS): the kernels stay Python functions, which only a launch would run
    triton = tl = None

BLOCK = 256  # columns per program of the row-wise kernels


def jit(fn: Any) -> Any:
    """A Triton kernel or device function where Triton is installed."""
    return triton.jit(fn) if triton is not None else fn


@jit
def tanh(x):
    """tanh through exp; below |x| = 1/4, where 1 − 2/(e^{2x} + 1) would lose x's low bits to cancellation, its
    Taylor series to x^13 (the next term is under 2e-12 of x there)."""
    x2 = x * x
    series = x * (
        1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0))))))
    )
    return tl.where(tl.abs(x) < 0.25, series, 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0))


@jit
def softmax(energy, allowed):
    """α = softmax of the energies [BLOCK_S] over the allowed positions; 0 everywhere where none is allowed."""
    energy = tl.where(allowed, energy, float("-inf"))
    e = tl.where(allowed, tl.exp(energy - tl.max(energy, axis=0)), 0.0)
    total = tl.sum(e, axis=0)
    return e / tl.where(total > 0, total, 1.0)


@jit
def context(weights, b, s, S, C, ann, ctx, ctx_c, ctx_c_stride, c_first, c_last, BLOCK_C: tl.constexpr):
    """Columns c_first..c_last of row b's context c = Σ_s α_s ann[b, s] [C] into ctx and ctx_c."""
    for c0 in range(c_first, c_last, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        values = tl.load(ann + b * S * C + s[:, None] * C + c[None, :], mask=(s[:, None] < S) & (c[None, :] < C), other=0.0)
        out = tl.sum(weights[:, None] * values, axis=0)
        tl.store(ctx + b * C + c, out, mask=c < C)
        tl.store(ctx_c + b * ctx_c_stride + c, out.to(ctx_c.dtype.element_ty), mask=c < C)


@jit
def context_back(b, s, S, C, d_ctx, d_ctx_stride, dcx, dcx_stride, ann, dc_out, dc_columns, BLOCK_C: tl.constexpr):
    """Row b back through `context` at positions s: dc = d_ctx [+ dcx], its first dc_columns (C or 0) into dc_out;
    returns dL/dα_s = dc·ann[b, s]."""
    d_weights = s.to(tl.float32) * 0.0
    for c0 in range(0, C, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        dc = tl.load(d_ctx + b * d_ctx_stride + c, mask=c < C, other=0.0).to(tl.float32)
        if dcx is not None:
            dc += tl.load(dcx + b * dcx_stride + c, mask=c < C, other=0.0).to(tl.float32)
        tl.store(dc_out + b * C + c, dc, mask=c < dc_columns)
        values = tl.load(ann + b * S * C + s[:, None] * C + c[None, :], mask=(s[:, None] < S) & (c[None, :] < C), other=0.0)
        d_weights += tl.sum(values * dc[None, :], axis=1)
    return d_weights


@jit
def softmax_back(weights, d_weights):
    """The energies' gradient from α's: α ∘ (dα − Σ α dα)."""
    return weights * (d_weights - tl.sum(weights * d_weights, axis=0))


def cdiv(n: int, block: int) -> int:
    """Blocks of `block` that cover n."""
    return -(-n // block)


def row_grid(rows: int, H: int) -> tuple[int, int]:
    return (rows, cdiv(H, BLOCK))


def positions_block(S: int) -> int:
    """The power of two ≥ S (a block of a row's positions)."""
    return 1 << max(S - 1, 0).bit_length()


def columns_block(S: int) -> int:
    """Columns per step of a Luong attention row's loops: tiles of ~8,192 values (32 per thread of 8 warps), so that
    few sequential steps cover a row (one program per sentence leaves most of a GPU's memory bandwidth idle)."""
    return max(64, min(256, 8192 // positions_block(S)))


# Warps per program of Luong's attention kernels (one program per sentence, tiles of columns_block).
ATTENTION_WARPS = 8
