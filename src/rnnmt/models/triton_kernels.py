"""Triton kernels for the stages of kernels.py, one launch each (imported only where Triton runs them: a
CUDA device, or a CPU under TRITON_INTERPRET=1 in the tests).

Every kernel reads its inputs in their own dtype (bfloat16 products, float32 states) and computes in
float32; outputs are written in each output's dtype. 2-D operands are rows with a row stride and
contiguous columns. tanh is written through exp (Triton's interpreter has no tanh): within ~1e-7 of torch's.
"""

from __future__ import annotations

import triton
import triton.language as tl
from torch import Tensor

BLOCK = 256  # columns per program of the row-wise kernels


@triton.jit
def _tanh(x):
    return 1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0)


@triton.jit
def _softmax_context(energy, real, b, s, S, C, alpha, ann, ctx, ctx_c, ctx_c_stride, BLOCK_C: tl.constexpr):
    """Row b of an attention: α = softmax of the energies [BLOCK_S] over the real positions, c = Σ_s α_s ann[b, s]."""
    energy = tl.where(real, energy, float("-inf"))
    e = tl.exp(energy - tl.max(energy, axis=0))
    weights = e / tl.sum(e, axis=0)
    tl.store(alpha + b * S + s, weights, mask=s < S)
    for c0 in range(0, C, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        values = tl.load(ann + b * S * C + s[:, None] * C + c[None, :], mask=(s[:, None] < S) & (c[None, :] < C), other=0.0)
        out = tl.sum(weights[:, None] * values, axis=0)
        tl.store(ctx + b * C + c, out, mask=c < C)
        tl.store(ctx_c + b * ctx_c_stride + c, out.to(ctx_c.dtype.element_ty), mask=c < C)


@triton.jit
def _scores_back(b, s, S, C, d_ctx, d_ctx_stride, dcx, dcx_stride, d_alpha, ann, alpha, dc_out, de_out,
                 HAS_DCX: tl.constexpr, HAS_DALPHA: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    """Row b back through `_softmax_context`: dc = d_ctx [+ dcx] (stored), the energies' gradient (stored, returned)."""
    d_weights = s.to(tl.float32) * 0.0
    for c0 in range(0, C, BLOCK_C):
        c = c0 + tl.arange(0, BLOCK_C)
        dc = tl.load(d_ctx + b * d_ctx_stride + c, mask=c < C, other=0.0).to(tl.float32)
        if HAS_DCX:
            dc += tl.load(dcx + b * dcx_stride + c, mask=c < C, other=0.0).to(tl.float32)
        tl.store(dc_out + b * C + c, dc, mask=c < C)
        values = tl.load(ann + b * S * C + s[:, None] * C + c[None, :], mask=(s[:, None] < S) & (c[None, :] < C), other=0.0)
        d_weights += tl.sum(values * dc[None, :], axis=1)
    if HAS_DALPHA:
        d_weights += tl.load(d_alpha + b * S + s, mask=s < S, other=0.0).to(tl.float32)
    weights = tl.load(alpha + b * S + s, mask=s < S, other=0.0)
    de = weights * (d_weights - tl.sum(weights * d_weights, axis=0))
    tl.store(de_out + b * S + s, de, mask=s < S)
    return de


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
def _gru_state(x, x_stride, xc, xc_stride, u, gates, h, h_stride, keep, cand, out, out_stride, out_c, out_c_stride, H,
               HAS_XC: tl.constexpr, HAS_KEEP: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre = tl.load(x + row * x_stride + 2 * H + j, mask=m).to(tl.float32)
    if HAS_XC:
        pre += tl.load(xc + row * xc_stride + 2 * H + j, mask=m).to(tl.float32)
    c = _tanh(pre + tl.load(u + row * H + j, mask=m).to(tl.float32))
    tl.store(cand + row * H + j, c, mask=m)
    h_prev = tl.load(h + row * h_stride + j, mask=m).to(tl.float32)
    step = (c - h_prev) * tl.load(gates + row * 2 * H + j, mask=m)
    if HAS_KEEP:
        step *= tl.load(keep + row).to(tl.float32)
    new = h_prev + step
    tl.store(out + row * out_stride + j, new, mask=m)
    tl.store(out_c + row * out_c_stride + j, new.to(out_c.dtype.element_ty), mask=m)


@triton.jit
def _gru_back_cand(base, m_, m_stride, extra, mq, mq_stride, gates, cand, keep, dh, dx, dx_c, H,
                   HAS_EXTRA: tl.constexpr, HAS_MQ: tl.constexpr, HAS_KEEP: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
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
def _additive_attention(keys, q, q_stride, v, mask, ann, tanh_out, alpha, ctx, ctx_c, S, A, C,
                        BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real = (s < S) & (tl.load(mask + b * S + s, mask=s < S, other=0) != 0)
    energy = tl.zeros([BLOCK_S], dtype=tl.float32)
    for a0 in range(0, A, BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        inside = (s[:, None] < S) & (a[None, :] < A)
        at = b * S * A + s[:, None] * A + a[None, :]
        pre = tl.load(keys + at, mask=inside, other=0.0) + tl.load(q + b * q_stride + a, mask=a < A, other=0.0).to(tl.float32)[None, :]
        t = _tanh(pre)
        tl.store(tanh_out + at, t, mask=inside)
        energy += tl.sum(t * tl.load(v + a, mask=a < A, other=0.0)[None, :], axis=1)
    _softmax_context(energy, real, b, s, S, C, alpha, ann, ctx, ctx_c, C, BLOCK_C)


@triton.jit
def _additive_attention_back(d_ctx, dcx, dcx_stride, d_alpha, ann, alpha, v, tanh_in, dc_out, de_out, d_keys, dq, dq_c, dq_c_stride, S, A, C,
                             HAS_DCX: tl.constexpr, HAS_DALPHA: tl.constexpr,
                             BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr, BLOCK_C: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    de = _scores_back(b, s, S, C, d_ctx, C, dcx, dcx_stride, d_alpha, ann, alpha, dc_out, de_out, HAS_DCX, HAS_DALPHA, BLOCK_C)
    for a0 in range(0, A, BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        inside = (s[:, None] < S) & (a[None, :] < A)
        at = b * S * A + s[:, None] * A + a[None, :]
        t = tl.load(tanh_in + at, mask=inside, other=0.0)
        d_pre = de[:, None] * tl.load(v + a, mask=a < A, other=0.0)[None, :] * (1.0 - t * t)
        tl.store(d_keys + at, tl.load(d_keys + at, mask=inside, other=0.0) + d_pre, mask=inside)
        total = tl.sum(d_pre, axis=0)
        tl.store(dq + b * A + a, total, mask=a < A)
        tl.store(dq_c + b * dq_c_stride + a, total.to(dq_c.dtype.element_ty), mask=a < A)


def _grid(rows: int, H: int) -> tuple[int, int]:
    return (rows, triton.cdiv(H, BLOCK))


def _s_block(S: int) -> int:
    return triton.next_power_of_2(S)


def gru_gates(x: Tensor, xc: Tensor | None, g: Tensor, h: Tensor, gates: Tensor, rh: Tensor, rh_c: Tensor) -> None:
    rows, H = h.shape
    _gru_gates[_grid(rows, H)](x, x.stride(0), xc if xc is not None else x, xc.stride(0) if xc is not None else 0, g, g.stride(0),
                               h, h.stride(0), gates, rh, rh_c, H, HAS_XC=xc is not None, BLOCK=BLOCK)  # fmt: skip


def gru_state(x: Tensor, xc: Tensor | None, u: Tensor, gates: Tensor, h: Tensor, keep: Tensor | None, cand: Tensor, out: Tensor, out_c: Tensor) -> None:
    rows, H = h.shape
    _gru_state[_grid(rows, H)](x, x.stride(0), xc if xc is not None else x, xc.stride(0) if xc is not None else 0, u, gates, h, h.stride(0),
                               keep if keep is not None else h, cand, out, out.stride(0), out_c, out_c.stride(0), H,
                               HAS_XC=xc is not None, HAS_KEEP=keep is not None, BLOCK=BLOCK)  # fmt: skip


def gru_back_cand(base: Tensor, m: Tensor, extra: Tensor | None, mq: Tensor | None, gates: Tensor, cand: Tensor, keep: Tensor | None,
                  dh: Tensor, dx: Tensor, dx_c: Tensor) -> None:  # fmt: skip
    rows, H = base.shape
    _gru_back_cand[_grid(rows, H)](base, m, m.stride(0), extra if extra is not None else base, mq if mq is not None else m,
                                   mq.stride(0) if mq is not None else 0, gates, cand, keep if keep is not None else base, dh, dx, dx_c, H,
                                   HAS_EXTRA=extra is not None, HAS_MQ=mq is not None, HAS_KEEP=keep is not None, BLOCK=BLOCK)  # fmt: skip


def gru_back_gates(dh: Tensor, drh: Tensor, gates: Tensor, cand: Tensor, h: Tensor, keep: Tensor | None, dx: Tensor, dx_c: Tensor, dzr_c: Tensor,
                   base: Tensor) -> None:  # fmt: skip
    rows, H = dh.shape
    _gru_back_gates[_grid(rows, H)](dh, drh, gates, cand, h, h.stride(0), keep if keep is not None else dh, dx, dx_c, dzr_c, dzr_c.stride(0), base, H,
                                    HAS_KEEP=keep is not None, BLOCK=BLOCK)  # fmt: skip


def additive_attention(keys: Tensor, q: Tensor, v: Tensor, mask: Tensor, ann: Tensor, tanh: Tensor, alpha: Tensor, ctx: Tensor, ctx_c: Tensor) -> None:
    B, S, A = keys.shape
    C = ann.shape[2]
    _additive_attention[(B,)](keys, q, q.stride(0), v, mask, ann, tanh, alpha, ctx, ctx_c, S, A, C,
                              BLOCK_S=_s_block(S), BLOCK_A=64, BLOCK_C=64)  # fmt: skip


def additive_attention_back(d_ctx: Tensor, dcx: Tensor | None, d_alpha: Tensor | None, ann: Tensor, alpha: Tensor, v: Tensor, tanh: Tensor,
                            dc: Tensor, de: Tensor, d_keys: Tensor, dq: Tensor, dq_c: Tensor) -> None:  # fmt: skip
    B, S, A = tanh.shape
    C = ann.shape[2]
    _additive_attention_back[(B,)](d_ctx, dcx if dcx is not None else d_ctx, dcx.stride(0) if dcx is not None else 0,
                                   d_alpha if d_alpha is not None else alpha, ann, alpha, v, tanh, dc, de, d_keys, dq, dq_c, dq_c.stride(0),
                                   S, A, C, HAS_DCX=dcx is not None, HAS_DALPHA=d_alpha is not None,
                                   BLOCK_S=_s_block(S), BLOCK_A=64, BLOCK_C=64)  # fmt: skip


@triton.jit
def _lstm_cell(base, base_stride, gemm, gemm_stride, c_prev, c_prev_stride, h_prev, h_prev_stride, keep, gates, c_raw, tanh_c, c_next, c_next_stride,
               h_next, h_next_stride, h_next_c, h_next_c_stride, fwd, fwd_stride, fwd_c, fwd_c_stride, fwd_mask, clip, H,
               HAS_BASE: tl.constexpr, HAS_KEEP: tl.constexpr, HAS_CLIP: tl.constexpr, HAS_FWD: tl.constexpr, HAS_FWD_C: tl.constexpr,
               HAS_FWD_MASK: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre_i = tl.load(gemm + row * gemm_stride + j, mask=m).to(tl.float32)
    pre_f = tl.load(gemm + row * gemm_stride + H + j, mask=m).to(tl.float32)
    pre_g = tl.load(gemm + row * gemm_stride + 2 * H + j, mask=m).to(tl.float32)
    pre_o = tl.load(gemm + row * gemm_stride + 3 * H + j, mask=m).to(tl.float32)
    if HAS_BASE:
        pre_i += tl.load(base + row * base_stride + j, mask=m).to(tl.float32)
        pre_f += tl.load(base + row * base_stride + H + j, mask=m).to(tl.float32)
        pre_g += tl.load(base + row * base_stride + 2 * H + j, mask=m).to(tl.float32)
        pre_o += tl.load(base + row * base_stride + 3 * H + j, mask=m).to(tl.float32)
    i, f, g, o = tl.sigmoid(pre_i), tl.sigmoid(pre_f), _tanh(pre_g), tl.sigmoid(pre_o)
    tl.store(gates + row * 4 * H + j, i, mask=m)
    tl.store(gates + row * 4 * H + H + j, f, mask=m)
    tl.store(gates + row * 4 * H + 2 * H + j, g, mask=m)
    tl.store(gates + row * 4 * H + 3 * H + j, o, mask=m)
    c_old = tl.load(c_prev + row * c_prev_stride + j, mask=m)
    c = f * c_old + i * g
    t = _tanh(c)
    h = o * t
    tl.store(c_raw + row * H + j, c, mask=m)
    tl.store(tanh_c + row * H + j, t, mask=m)
    if HAS_CLIP:
        c = tl.minimum(tl.maximum(c, -clip), clip)
    h_state = h
    if HAS_KEEP:
        k = tl.load(keep + row).to(tl.float32)
        h_state = tl.load(h_prev + row * h_prev_stride + j, mask=m) + k * (h - tl.load(h_prev + row * h_prev_stride + j, mask=m))
        c = c_old + k * (c - c_old)
    tl.store(c_next + row * c_next_stride + j, c, mask=m)
    tl.store(h_next + row * h_next_stride + j, h_state, mask=m)
    tl.store(h_next_c + row * h_next_c_stride + j, h_state.to(h_next_c.dtype.element_ty), mask=m)
    out = h
    if HAS_FWD_MASK:
        out = out * tl.load(fwd_mask + row * H + j, mask=m).to(tl.float32)
    if HAS_FWD:
        tl.store(fwd + row * fwd_stride + j, out, mask=m)
    if HAS_FWD_C:
        tl.store(fwd_c + row * fwd_c_stride + j, out.to(fwd_c.dtype.element_ty), mask=m)


@triton.jit
def _lstm_cell_back(rest, own, own_stride, below, below_stride, below_mask, extra, extra_stride, extra_first, keep, dc, gates, c_prev, c_prev_stride,
                    tanh_c, c_raw, clip, d_gates, d_gates_c, H, HAS_REST: tl.constexpr, HAS_OWN: tl.constexpr, HAS_BELOW_MASK: tl.constexpr,
                    HAS_EXTRA: tl.constexpr, HAS_KEEP: tl.constexpr, HAS_CLIP: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    below_grad = tl.load(below + row * below_stride + j, mask=m).to(tl.float32)
    if HAS_BELOW_MASK:
        below_grad = below_grad * tl.load(below_mask + row * H + j, mask=m).to(tl.float32)
    if HAS_EXTRA:
        mine = m & ((j * 0 + row) >= extra_first)  # only the last rows have an extra term
        below_grad += tl.load(extra + (row - extra_first) * extra_stride + j, mask=mine, other=0.0).to(tl.float32)
    dh = below_grad
    if HAS_REST:
        dh = tl.load(rest + row * H + j, mask=m) + dh
    if HAS_OWN:
        dh = tl.load(own + row * own_stride + j, mask=m).to(tl.float32) + dh
    d_cell = tl.load(dc + row * H + j, mask=m)
    dh_new, dc_new = dh, d_cell
    if HAS_KEEP:
        k = tl.load(keep + row).to(tl.float32)
        dh_new, dc_new = dh * k, d_cell * k
        tl.store(rest + row * H + j, dh - dh_new, mask=m)
        d_cell = d_cell - dc_new
    else:
        d_cell = tl.zeros([BLOCK], dtype=tl.float32)
    if HAS_CLIP:
        dc_new = tl.where(tl.abs(tl.load(c_raw + row * H + j, mask=m)) <= clip, dc_new, 0.0)
    i = tl.load(gates + row * 4 * H + j, mask=m)
    f = tl.load(gates + row * 4 * H + H + j, mask=m)
    g = tl.load(gates + row * 4 * H + 2 * H + j, mask=m)
    o = tl.load(gates + row * 4 * H + 3 * H + j, mask=m)
    t = tl.load(tanh_c + row * H + j, mask=m)
    c_in = dc_new + dh_new * o * (1.0 - t * t)
    d_i = c_in * g * (1.0 - i) * i
    d_f = c_in * tl.load(c_prev + row * c_prev_stride + j, mask=m) * (1.0 - f) * f
    d_g = c_in * i * (1.0 - g * g)
    d_o = dh_new * t * (1.0 - o) * o
    tl.store(d_gates + row * 4 * H + j, d_i, mask=m)
    tl.store(d_gates + row * 4 * H + H + j, d_f, mask=m)
    tl.store(d_gates + row * 4 * H + 2 * H + j, d_g, mask=m)
    tl.store(d_gates + row * 4 * H + 3 * H + j, d_o, mask=m)
    tl.store(d_gates_c + row * 4 * H + j, d_i.to(d_gates_c.dtype.element_ty), mask=m)
    tl.store(d_gates_c + row * 4 * H + H + j, d_f.to(d_gates_c.dtype.element_ty), mask=m)
    tl.store(d_gates_c + row * 4 * H + 2 * H + j, d_g.to(d_gates_c.dtype.element_ty), mask=m)
    tl.store(d_gates_c + row * 4 * H + 3 * H + j, d_o.to(d_gates_c.dtype.element_ty), mask=m)
    tl.store(dc + row * H + j, d_cell + c_in * f, mask=m)


@triton.jit
def _dot_attention(top, top_stride, keys, mask, ann, alpha, ctx, ctx_c, ctx_c_stride, S, H, BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr):
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real = (s < S) & (tl.load(mask + b * S + s, mask=s < S, other=0) != 0)
    energy = tl.zeros([BLOCK_S], dtype=tl.float32)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
        energy += tl.sum(k * tl.load(top + b * top_stride + h, mask=h < H, other=0.0)[None, :], axis=1)
    _softmax_context(energy, real, b, s, S, H, alpha, ann, ctx, ctx_c, ctx_c_stride, BLOCK_H)


@triton.jit
def _dot_attention_back(d_ctop, d_ctop_stride, d_alpha, ann, alpha, keys, d_ctx, d_scores, d_below, S, H,
                        HAS_DALPHA: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_H: tl.constexpr):  # fmt: skip
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    de = _scores_back(b, s, S, H, d_ctop, d_ctop_stride, d_ctop, 0, d_alpha, ann, alpha, d_ctx, d_scores, False, HAS_DALPHA, BLOCK_H)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
        direct = tl.load(d_ctop + b * d_ctop_stride + H + h, mask=h < H, other=0.0).to(tl.float32)
        tl.store(d_below + b * H + h, tl.sum(de[:, None] * k, axis=0) + direct, mask=h < H)


@triton.jit
def _feed_tanh(bias, pre, h_tilde, fed, fed_stride, fed_c, fed_c_stride, fed_mask, H,
               HAS_BIAS: tl.constexpr, HAS_FED: tl.constexpr, HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    x = tl.load(pre + row * H + j, mask=m).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias + j, mask=m).to(tl.float32)
    y = _tanh(x)
    tl.store(h_tilde + row * H + j, y, mask=m)
    if HAS_FED:
        if HAS_MASK:
            y = y * tl.load(fed_mask + row * H + j, mask=m).to(tl.float32)
        tl.store(fed + row * fed_stride + j, y, mask=m)
        tl.store(fed_c + row * fed_c_stride + j, y.to(fed_c.dtype.element_ty), mask=m)


@triton.jit
def _feed_tanh_back(d_h_tilde, d_fed, d_fed_stride, fed_mask, h_tilde, d_pre, d_pre_c, H,
                    HAS_FED: tl.constexpr, HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):  # fmt: skip
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    d = tl.load(d_h_tilde + row * H + j, mask=m).to(tl.float32)
    if HAS_FED:
        back = tl.load(d_fed + row * d_fed_stride + j, mask=m).to(tl.float32)
        if HAS_MASK:
            back = back * tl.load(fed_mask + row * H + j, mask=m).to(tl.float32)
        d = d + back
    y = tl.load(h_tilde + row * H + j, mask=m)
    out = d * (1.0 - y * y)
    tl.store(d_pre + row * H + j, out, mask=m)
    tl.store(d_pre_c + row * H + j, out.to(d_pre_c.dtype.element_ty), mask=m)


def _or(t: Tensor | None, fallback: Tensor) -> Tensor:
    """A pointer for an absent operand (its kernel branch is compiled out)."""
    return t if t is not None else fallback


def _stride(t: Tensor | None) -> int:
    return t.stride(0) if t is not None else 0


def lstm_cell(base: Tensor | None, gemm: Tensor, c_prev: Tensor, h_prev: Tensor | None, keep: Tensor | None, clip: float | None, gates: Tensor,
              c_raw: Tensor, tanh_c: Tensor, c_next: Tensor, h_next: Tensor, h_next_c: Tensor, fwd: Tensor | None, fwd_c: Tensor | None,
              fwd_mask: Tensor | None) -> None:  # fmt: skip
    rows, H = c_raw.shape
    _lstm_cell[_grid(rows, H)](_or(base, gemm), _stride(base), gemm, gemm.stride(0), c_prev, c_prev.stride(0), _or(h_prev, c_prev), _stride(h_prev),
                               _or(keep, c_prev), gates, c_raw, tanh_c, c_next, c_next.stride(0), h_next, h_next.stride(0), h_next_c,
                               h_next_c.stride(0), _or(fwd, c_raw), _stride(fwd), _or(fwd_c, h_next_c), _stride(fwd_c), _or(fwd_mask, c_raw),
                               clip or 0.0, H, HAS_BASE=base is not None, HAS_KEEP=keep is not None, HAS_CLIP=clip is not None,
                               HAS_FWD=fwd is not None, HAS_FWD_C=fwd_c is not None, HAS_FWD_MASK=fwd_mask is not None, BLOCK=BLOCK)  # fmt: skip


def lstm_cell_back(rest: Tensor | None, own: Tensor | None, below: Tensor, below_mask: Tensor | None, extra: Tensor | None, keep: Tensor | None,
                   dc: Tensor, gates: Tensor, c_prev: Tensor, tanh_c: Tensor, c_raw: Tensor, clip: float | None, d_gates: Tensor,
                   d_gates_c: Tensor) -> None:  # fmt: skip
    rows, H = dc.shape
    first = rows - extra.shape[0] if extra is not None else rows
    _lstm_cell_back[_grid(rows, H)](_or(rest, dc), _or(own, below), _stride(own), below, below.stride(0), _or(below_mask, dc), _or(extra, dc),
                                    _stride(extra), first, _or(keep, dc), dc, gates, c_prev, c_prev.stride(0), tanh_c, c_raw, clip or 0.0, d_gates,
                                    d_gates_c, H, HAS_REST=rest is not None, HAS_OWN=own is not None, HAS_BELOW_MASK=below_mask is not None,
                                    HAS_EXTRA=extra is not None, HAS_KEEP=keep is not None, HAS_CLIP=clip is not None, BLOCK=BLOCK)  # fmt: skip


def dot_attention(top: Tensor, keys: Tensor, mask: Tensor, ann: Tensor, alpha: Tensor, ctx: Tensor, ctx_c: Tensor) -> None:
    B, S, H = keys.shape
    _dot_attention[(B,)](top, top.stride(0), keys, mask, ann, alpha, ctx, ctx_c, ctx_c.stride(0), S, H, BLOCK_S=_s_block(S), BLOCK_H=64)


def dot_attention_back(d_ctop: Tensor, d_alpha: Tensor | None, ann: Tensor, alpha: Tensor, keys: Tensor, d_ctx: Tensor, d_scores: Tensor,
                       d_below: Tensor) -> None:  # fmt: skip
    B, S, H = keys.shape
    _dot_attention_back[(B,)](d_ctop, d_ctop.stride(0), _or(d_alpha, alpha), ann, alpha, keys, d_ctx, d_scores, d_below, S, H,
                              HAS_DALPHA=d_alpha is not None, BLOCK_S=_s_block(S), BLOCK_H=64)  # fmt: skip


def feed_tanh(bias: Tensor | None, pre: Tensor, h_tilde: Tensor, fed: Tensor | None, fed_c: Tensor | None, fed_mask: Tensor | None) -> None:
    rows, H = h_tilde.shape
    _feed_tanh[_grid(rows, H)](_or(bias, pre), pre, h_tilde, _or(fed, h_tilde), _stride(fed), _or(fed_c, pre), _stride(fed_c), _or(fed_mask, h_tilde), H,
                               HAS_BIAS=bias is not None, HAS_FED=fed is not None, HAS_MASK=fed_mask is not None, BLOCK=BLOCK)  # fmt: skip


def feed_tanh_back(d_h_tilde: Tensor, d_fed: Tensor | None, fed_mask: Tensor | None, h_tilde: Tensor, d_pre: Tensor, d_pre_c: Tensor) -> None:
    rows, H = h_tilde.shape
    _feed_tanh_back[_grid(rows, H)](d_h_tilde, _or(d_fed, d_h_tilde), _stride(d_fed), _or(fed_mask, h_tilde), h_tilde, d_pre, d_pre_c, H,
                                    HAS_FED=d_fed is not None, HAS_MASK=fed_mask is not None, BLOCK=BLOCK)  # fmt: skip
