"""Triton kernels of the GRU and additive-attention stages (stages.py): one launch per GRU stage, two per
attention stage (triton_common.py says how they read and write).

An attention step is two kernels so that a sentence's work spreads over many programs: one program per
sentence, as one kernel needs for the softmax between the energies and the context, left most of a GPU's
memory bandwidth idle (33 µs a step at paper size on an H100). Energies are computed a few positions per
program, the context a block of columns per program, each recomputing the softmax of ≤ 64 energies;
backward alike (scores by positions, then keys by columns)."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from rnnmt.recurrence.kernels.triton_common import BLOCK, context, context_back, positions_block, present_or, row_grid, row_stride, softmax, softmax_back, tanh

# Source positions per program of the energies and of their backward, and the columns of their sums' tiles;
# columns per program of the context and keys (over all positions).
ROW_POSITIONS = 4
ROW_SPAN = 1024
ROW_COLUMNS = 128


@triton.jit
def _gru_gates(x, x_stride, xc, xc_stride, g, g_stride, h, h_stride, gates, rh, rh_c, H, HAS_XC: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre_z = tl.load(x + row * x_stride + j, mask=m).to(tl.float32)
    pre_r = tl.load(x + row * x_stride + H + j, mask=m).to(tl.float32)
    if HAS_XC:
        pre_z += tl.load(xc + row * xc_stride + j, mask=m).to(tl.float32)
        pre_r += tl.load(xc + row * xc_stride + H + j, mask=m).to(tl.float32)
    pre_z += tl.load(g + row * g_stride + j, mask=m).to(tl.float32)
    pre_r += tl.load(g + row * g_stride + H + j, mask=m).to(tl.float32)
    z, r = tl.sigmoid(pre_z), tl.sigmoid(pre_r)
    tl.store(gates + row * 2 * H + j, z, mask=m)
    tl.store(gates + row * 2 * H + H + j, r, mask=m)
    prod = r * tl.load(h + row * h_stride + j, mask=m).to(tl.float32)
    tl.store(rh + row * H + j, prod, mask=m)
    tl.store(rh_c + row * H + j, prod.to(rh_c.dtype.element_ty), mask=m)


@triton.jit
def _gru_state(
    x,
    x_stride,
    xc,
    xc_stride,
    u,
    gates,
    h,
    h_stride,
    keep,
    cand,
    out,
    out_stride,
    out_c,
    out_c_stride,
    H,
    HAS_XC: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre = tl.load(x + row * x_stride + 2 * H + j, mask=m).to(tl.float32)
    if HAS_XC:
        pre += tl.load(xc + row * xc_stride + 2 * H + j, mask=m).to(tl.float32)
    c = tanh(pre + tl.load(u + row * H + j, mask=m).to(tl.float32))
    tl.store(cand + row * H + j, c, mask=m)
    h_prev = tl.load(h + row * h_stride + j, mask=m).to(tl.float32)
    step = (c - h_prev) * tl.load(gates + row * 2 * H + j, mask=m)
    if HAS_KEEP:
        step *= tl.load(keep + row).to(tl.float32)
    new = h_prev + step
    tl.store(out + row * out_stride + j, new, mask=m)
    tl.store(out_c + row * out_c_stride + j, new.to(out_c.dtype.element_ty), mask=m)


@triton.jit
def _gru_back_cand(
    base,
    m_,
    m_stride,
    extra,
    mq,
    mq_stride,
    gates,
    cand,
    keep,
    dh,
    dx,
    dx_c,
    H,
    HAS_EXTRA: tl.constexpr,
    HAS_MQ: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    total = tl.load(base + row * H + j, mask=m) + tl.load(m_ + row * m_stride + j, mask=m).to(tl.float32)
    if HAS_EXTRA:
        total += tl.load(extra + row * H + j, mask=m).to(tl.float32)
    if HAS_MQ:
        total += tl.load(mq + row * mq_stride + j, mask=m).to(tl.float32)
    tl.store(dh + row * H + j, total, mask=m)
    dstep = total
    if HAS_KEEP:
        dstep *= tl.load(keep + row).to(tl.float32)
    c = tl.load(cand + row * H + j, mask=m)
    dxh = dstep * tl.load(gates + row * 2 * H + j, mask=m) * (1.0 - c * c)
    tl.store(dx + row * 3 * H + 2 * H + j, dxh, mask=m)
    tl.store(dx_c + row * 3 * H + 2 * H + j, dxh.to(dx_c.dtype.element_ty), mask=m)


@triton.jit
def _gru_back_gates(dh, drh, gates, cand, h, h_stride, keep, dx, dx_c, dzr_c, dzr_stride, base, H, HAS_KEEP: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    total = tl.load(dh + row * H + j, mask=m)
    dstep = total
    if HAS_KEEP:
        dstep *= tl.load(keep + row).to(tl.float32)
    z = tl.load(gates + row * 2 * H + j, mask=m)
    r = tl.load(gates + row * 2 * H + H + j, mask=m)
    h_prev = tl.load(h + row * h_stride + j, mask=m).to(tl.float32)
    d_rh = tl.load(drh + row * H + j, mask=m).to(tl.float32)
    dz = dstep * (tl.load(cand + row * H + j, mask=m) - h_prev) * (1.0 - z) * z
    dr = d_rh * h_prev * (1.0 - r) * r
    tl.store(dx + row * 3 * H + j, dz, mask=m)
    tl.store(dx + row * 3 * H + H + j, dr, mask=m)
    tl.store(dx_c + row * 3 * H + j, dz.to(dx_c.dtype.element_ty), mask=m)
    tl.store(dx_c + row * 3 * H + H + j, dr.to(dx_c.dtype.element_ty), mask=m)
    tl.store(dzr_c + row * dzr_stride + j, dz.to(dzr_c.dtype.element_ty), mask=m)
    tl.store(dzr_c + row * dzr_stride + H + j, dr.to(dzr_c.dtype.element_ty), mask=m)
    tl.store(base + row * H + j, total + d_rh * r - dstep * z, mask=m)


@triton.jit
def _additive_energies(keys, q, q_stride, v, tanh_out, energy, S, A, BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr):
    """Positions s of row b: tanh(keys + q) into tanh_out, e_s = v·tanh into energy."""
    b = tl.program_id(0)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    e = tl.zeros([BLOCK_S], dtype=tl.float32)
    for a0 in range(0, A, BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        inside = (s[:, None] < S) & (a[None, :] < A)
        at = b * S * A + s[:, None] * A + a[None, :]
        pre = tl.load(keys + at, mask=inside, other=0.0) + tl.load(q + b * q_stride + a, mask=a < A, other=0.0).to(tl.float32)[None, :]
        t = tanh(pre)
        tl.store(tanh_out + at, t, mask=inside)
        e += tl.sum(t * tl.load(v + a, mask=a < A, other=0.0)[None, :], axis=1)
    tl.store(energy + b * S + s, e, mask=s < S)


@triton.jit
def _additive_context(energy, mask, ann, alpha, ctx, ctx_c, S, C, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    """Columns of row b's context from α = softmax(e) over the real positions (every column block computes α; the first stores it)."""
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real = (s < S) & (tl.load(mask + b * S + s, mask=s < S, other=0) != 0)
    weights = softmax(tl.load(energy + b * S + s, mask=s < S, other=0.0), real)
    tl.store(alpha + b * S + s, weights, mask=s < tl.where(tl.program_id(1) == 0, S, 0))
    c_first = tl.program_id(1) * BLOCK_C
    context(weights, b, s, S, C, ann, ctx, ctx_c, C, c_first, c_first + BLOCK_C, BLOCK_C)


@triton.jit
def _additive_scores_back(
    d_ctx,
    dcx,
    dcx_stride,
    d_alpha,
    ann,
    dc_out,
    d_weights_out,
    S,
    C,
    HAS_DCX: tl.constexpr,
    HAS_DALPHA: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Positions s of row b: dL/dα_s = dc·ann[b, s] [+ d_alpha] into d_weights_out; dc = d_ctx [+ dcx] (stored by the first block)."""
    b = tl.program_id(0)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    d_weights = context_back(b, s, S, C, d_ctx, C, dcx, dcx_stride, ann, dc_out, tl.where(tl.program_id(1) == 0, C, 0), HAS_DCX, BLOCK_C)
    if HAS_DALPHA:
        d_weights += tl.load(d_alpha + b * S + s, mask=s < S, other=0.0).to(tl.float32)
    tl.store(d_weights_out + b * S + s, d_weights, mask=s < S)


@triton.jit
def _additive_keys_back(d_weights, alpha, v, tanh_in, de_out, d_keys, dq, dq_c, dq_c_stride, S, A, BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr):
    """Columns a of row b: de = softmax backward (stored by the first block); d_keys += de∘v∘(1 − tanh²), dq = its sum over s."""
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    de = softmax_back(tl.load(alpha + b * S + s, mask=s < S, other=0.0), tl.load(d_weights + b * S + s, mask=s < S, other=0.0))
    tl.store(de_out + b * S + s, de, mask=s < tl.where(tl.program_id(1) == 0, S, 0))
    a = tl.program_id(1) * BLOCK_A + tl.arange(0, BLOCK_A)
    inside = (s[:, None] < S) & (a[None, :] < A)
    at = b * S * A + s[:, None] * A + a[None, :]
    t = tl.load(tanh_in + at, mask=inside, other=0.0)
    d_pre = de[:, None] * tl.load(v + a, mask=a < A, other=0.0)[None, :] * (1.0 - t * t)
    tl.store(d_keys + at, tl.load(d_keys + at, mask=inside, other=0.0) + d_pre, mask=inside)
    total = tl.sum(d_pre, axis=0)
    tl.store(dq + b * A + a, total, mask=a < A)
    tl.store(dq_c + b * dq_c_stride + a, total.to(dq_c.dtype.element_ty), mask=a < A)


def gru_gates(s: Any) -> None:
    """The `gru_gates` stage (stages.py) on its operands `s`."""
    rows, H = s.h.shape
    _gru_gates[row_grid(rows, H)](
        s.x,
        s.x.stride(0),
        s.xc if s.xc is not None else s.x,
        s.xc.stride(0) if s.xc is not None else 0,
        s.g,
        s.g.stride(0),
        s.h,
        s.h.stride(0),
        s.gates,
        s.rh,
        s.rh_c,
        H,
        HAS_XC=s.xc is not None,
        BLOCK=BLOCK,
    )


def gru_state(s: Any) -> None:
    """The `gru_state` stage (stages.py) on its operands `s`."""
    rows, H = s.h.shape
    _gru_state[row_grid(rows, H)](
        s.x,
        s.x.stride(0),
        s.xc if s.xc is not None else s.x,
        s.xc.stride(0) if s.xc is not None else 0,
        s.u,
        s.gates,
        s.h,
        s.h.stride(0),
        s.keep if s.keep is not None else s.h,
        s.cand,
        s.out,
        s.out.stride(0),
        s.out_c,
        s.out_c.stride(0),
        H,
        HAS_XC=s.xc is not None,
        HAS_KEEP=s.keep is not None,
        BLOCK=BLOCK,
    )


def gru_back_cand(s: Any) -> None:
    """The `gru_back_cand` stage (stages.py) on its operands `s`."""
    rows, H = s.base.shape
    _gru_back_cand[row_grid(rows, H)](
        s.base,
        s.m,
        s.m.stride(0),
        s.extra if s.extra is not None else s.base,
        s.mq if s.mq is not None else s.m,
        s.mq.stride(0) if s.mq is not None else 0,
        s.gates,
        s.cand,
        s.keep if s.keep is not None else s.base,
        s.dh,
        s.dx,
        s.dx_c,
        H,
        HAS_EXTRA=s.extra is not None,
        HAS_MQ=s.mq is not None,
        HAS_KEEP=s.keep is not None,
        BLOCK=BLOCK,
    )


def gru_back_gates(s: Any) -> None:
    """The `gru_back_gates` stage (stages.py) on its operands `s`."""
    rows, H = s.dh.shape
    _gru_back_gates[row_grid(rows, H)](
        s.dh,
        s.drh,
        s.gates,
        s.cand,
        s.h,
        s.h.stride(0),
        s.keep if s.keep is not None else s.dh,
        s.dx,
        s.dx_c,
        s.dzr_c,
        s.dzr_c.stride(0),
        s.base,
        H,
        HAS_KEEP=s.keep is not None,
        BLOCK=BLOCK,
    )


def additive_attention(s: Any) -> None:
    """The `additive_attention` stage (stages.py) on its operands `s`."""
    B, S, A = s.keys.shape
    C = s.ann.shape[2]
    energy = s.alpha.new_empty(B, S)
    _additive_energies[(B, triton.cdiv(S, ROW_POSITIONS))](s.keys, s.q, s.q.stride(0), s.v, s.tanh, energy, S, A, BLOCK_S=ROW_POSITIONS, BLOCK_A=ROW_SPAN)
    _additive_context[(B, triton.cdiv(C, ROW_COLUMNS))](energy, s.mask, s.ann, s.alpha, s.ctx, s.ctx_c, S, C, BLOCK_S=positions_block(S), BLOCK_C=ROW_COLUMNS)


def additive_attention_back(s: Any) -> None:
    """The `additive_attention_back` stage (stages.py) on its operands `s`."""
    B, S, A = s.tanh.shape
    C = s.ann.shape[2]
    d_weights = s.alpha.new_empty(B, S)
    _additive_scores_back[(B, triton.cdiv(S, ROW_POSITIONS))](
        s.d_ctx,
        present_or(s.dcx, s.d_ctx),
        row_stride(s.dcx),
        present_or(s.d_alpha, s.alpha),
        s.ann,
        s.dc,
        d_weights,
        S,
        C,
        HAS_DCX=s.dcx is not None,
        HAS_DALPHA=s.d_alpha is not None,
        BLOCK_S=ROW_POSITIONS,
        BLOCK_C=ROW_SPAN,
    )
    _additive_keys_back[(B, triton.cdiv(A, ROW_COLUMNS))](
        d_weights, s.alpha, s.v, s.tanh, s.de, s.d_keys, s.dq, s.dq_c, s.dq_c.stride(0), S, A, BLOCK_S=positions_block(S), BLOCK_A=ROW_COLUMNS
    )
