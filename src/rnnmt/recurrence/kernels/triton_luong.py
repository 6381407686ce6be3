"""Triton kernels of the LSTM, Luong-attention and input-feeding stages (stages.py), one launch each
(triton_common.py says how they read and write)."""

from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

from rnnmt.recurrence.kernels.triton_common import (
    ATTENTION_WARPS,
    BLOCK,
    columns_block,
    context,
    context_back,
    positions_block,
    present_or,
    row_grid,
    row_stride,
    softmax,
    softmax_back,
    tanh,
)


@triton.jit
def _lstm_cell(
    base,
    base_stride,
    gemm,
    gemm_stride,
    c_prev,
    c_prev_stride,
    h_prev,
    h_prev_stride,
    keep,
    gates,
    c_raw,
    tanh_c,
    c_next,
    c_next_stride,
    h_next,
    h_next_stride,
    h_next_c,
    h_next_c_stride,
    fwd,
    fwd_stride,
    fwd_c,
    fwd_c_stride,
    fwd_mask,
    clip,
    H,
    HAS_BASE: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    HAS_CLIP: tl.constexpr,
    HAS_FWD: tl.constexpr,
    HAS_FWD_C: tl.constexpr,
    HAS_FWD_MASK: tl.constexpr,
    BLOCK: tl.constexpr,
):
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
    i, f, g, o = tl.sigmoid(pre_i), tl.sigmoid(pre_f), tanh(pre_g), tl.sigmoid(pre_o)
    tl.store(gates + row * 4 * H + j, i, mask=m)
    tl.store(gates + row * 4 * H + H + j, f, mask=m)
    tl.store(gates + row * 4 * H + 2 * H + j, g, mask=m)
    tl.store(gates + row * 4 * H + 3 * H + j, o, mask=m)
    c_old = tl.load(c_prev + row * c_prev_stride + j, mask=m)
    c = f * c_old + i * g
    t = tanh(c)
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
def _lstm_cell_back(
    rest,
    own,
    own_stride,
    below,
    below_stride,
    below_mask,
    extra,
    extra_stride,
    extra_first,
    keep,
    dc,
    gates,
    c_prev,
    c_prev_stride,
    tanh_c,
    c_raw,
    clip,
    d_gates,
    d_gates_c,
    H,
    HAS_REST: tl.constexpr,
    HAS_OWN: tl.constexpr,
    HAS_BELOW_MASK: tl.constexpr,
    HAS_EXTRA: tl.constexpr,
    HAS_KEEP: tl.constexpr,
    HAS_CLIP: tl.constexpr,
    BLOCK: tl.constexpr,
):
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
def _positions(mask, b, s, S, REVERSED: tl.constexpr):
    """Row b's real positions, its length n (and as a float) and each position's original word index (float)."""
    real = (s < S) & (tl.load(mask + b * S + s, mask=s < S, other=0) != 0)
    n = tl.sum(real.to(tl.int32), axis=0)
    nf = n.to(tl.float32)
    if REVERSED:
        original = nf - 1.0 - s.to(tl.float32)
    else:
        original = s.to(tl.float32)
    return real, n, nf, original


@triton.jit
def _luong_attention(
    top,
    top_stride,
    q,
    q_stride,
    keys,
    mask,
    ann,
    v_a,
    v_p,
    alpha,
    soft,
    ctx,
    ctx_c,
    ctx_c_stride,
    pos,
    tanh_u,
    S,
    H,
    Q,
    P,
    step,
    window,
    inv_two_var,
    SCORE: tl.constexpr,
    KIND: tl.constexpr,
    REVERSED: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_H: tl.constexpr,
):
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real, n, nf, original = _positions(mask, b, s, S, REVERSED)
    allowed = real
    if KIND == 1:  # local-m: centred on the target step, at most on the last word
        allowed = allowed & (tl.abs(original - tl.minimum(step, n - 1).to(tl.float32)) <= window)
    if KIND == 2:  # local-p: p_t = n·σ(v_p·tanh(W_p h_t)), the last H columns of q
        z = tl.zeros([BLOCK_H], dtype=tl.float32)
        for h0 in range(0, H, BLOCK_H):
            h = h0 + tl.arange(0, BLOCK_H)
            u = tanh(tl.load(q + b * q_stride + Q - H + h, mask=h < H, other=0.0).to(tl.float32))
            tl.store(tanh_u + b * H + h, u, mask=h < H)
            z += u * tl.load(v_p + h, mask=h < H, other=0.0).to(tl.float32)
        p = nf * tl.sigmoid(tl.sum(z, axis=0))
        tl.store(pos + b, p)
        allowed = allowed & (tl.abs(original - tl.floor(p)) <= window)
    energy = tl.zeros([BLOCK_S], dtype=tl.float32)
    if SCORE == 0:  # dot, general: keys·h_t
        for h0 in range(0, H, BLOCK_H):
            h = h0 + tl.arange(0, BLOCK_H)
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
            energy += tl.sum(k * tl.load(top + b * top_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :], axis=1)
    if SCORE == 1:  # concat: v_a·tanh(h̄_s + W_a h_t), W_a h_t the first H columns of q
        for h0 in range(0, H, BLOCK_H):
            h = h0 + tl.arange(0, BLOCK_H)
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
            t = tanh(k + tl.load(q + b * q_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :])
            energy += tl.sum(t * tl.load(v_a + h, mask=h < H, other=0.0).to(tl.float32)[None, :], axis=1)
    if SCORE == 2:  # location: (W_a h_t) at each position's slot P − n + s; positions read before the first slot get none
        slot = s + (P - n)
        energy = tl.load(q + b * q_stride + slot, mask=real & (slot >= 0), other=0.0).to(tl.float32)
        allowed = allowed & (slot >= 0)
    weights = softmax(energy, allowed)
    if KIND == 2:  # the softmax, then times the Gaussian exp(−(j − p_t)² / 2σ²), not renormalised
        tl.store(soft + b * S + s, weights, mask=s < S)
        offset = original - p
        weights = weights * tl.exp(-(offset * offset) * inv_two_var)
    tl.store(alpha + b * S + s, weights, mask=s < S)
    context(weights, b, s, S, H, ann, ctx, ctx_c, ctx_c_stride, 0, H, BLOCK_H)


@triton.jit
def _location_back(de, real, s, n, b, P, Q, dq, dq_c, dq_c_stride, BLOCK_P: tl.constexpr):
    """location: each slot's gradient is its position's score gradient (slots are distinct within a row), into dq."""
    j = tl.arange(0, BLOCK_P)
    hit = ((s + (P - n))[:, None] == j[None, :]) & real[:, None]
    total = tl.sum(tl.where(hit, de[:, None], 0.0), axis=0)
    tl.store(dq + b * Q + j, total, mask=j < P)
    tl.store(dq_c + b * dq_c_stride + j, total.to(dq_c.dtype.element_ty), mask=j < P)


@triton.jit
def _predicted_position_back(d_pos, p, nf, b, H, Q, v_p, tanh_u, dz, dq, dq_c, dq_c_stride, BLOCK_H: tl.constexpr):
    """local-p's p = n·σ(z), z = v_p·tanh(u): dz, then du into dq's last H columns."""
    sig = p / nf
    d_z = d_pos * nf * sig * (1.0 - sig)
    tl.store(dz + b, d_z)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        u = tl.load(tanh_u + b * H + h, mask=h < H, other=0.0)
        du = d_z * tl.load(v_p + h, mask=h < H, other=0.0).to(tl.float32) * (1.0 - u * u)
        tl.store(dq + b * Q + Q - H + h, du, mask=h < H)
        tl.store(dq_c + b * dq_c_stride + Q - H + h, du.to(dq_c.dtype.element_ty), mask=h < H)


@triton.jit
def _luong_attention_back(
    d_ctop,
    d_ctop_stride,
    d_alpha,
    ann,
    alpha,
    soft,
    keys,
    q,
    q_stride,
    mask,
    v_a,
    v_p,
    pos,
    tanh_u,
    d_ctx,
    d_scores,
    d_below,
    dq,
    dq_c,
    dq_c_stride,
    d_keys,
    dv_rows,
    dz,
    S,
    H,
    Q,
    P,
    window,
    inv_two_var,
    SCORE: tl.constexpr,
    KIND: tl.constexpr,
    REVERSED: tl.constexpr,
    HAS_DALPHA: tl.constexpr,
    BLOCK_S: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real, n, nf, original = _positions(mask, b, s, S, REVERSED)
    d_weights = context_back(b, s, S, H, d_ctop, d_ctop_stride, d_ctop, 0, ann, d_ctx, H, False, BLOCK_H)
    if HAS_DALPHA:
        d_weights += tl.load(d_alpha + b * S + s, mask=s < S, other=0.0).to(tl.float32)
    if KIND == 2:  # through the Gaussian to the softmax and to p_t (⌊p_t⌋, the window's centre, has no gradient)
        weights = tl.load(soft + b * S + s, mask=s < S, other=0.0)
        p = tl.load(pos + b)
        offset = original - p
        gauss = tl.exp(-(offset * offset) * inv_two_var)
        d_pos = tl.sum(tl.where(s < S, d_weights * weights * gauss * offset, 0.0), axis=0) * (2.0 * inv_two_var)
        d_weights = d_weights * gauss
    else:
        weights = tl.load(alpha + b * S + s, mask=s < S, other=0.0)
    de = softmax_back(weights, d_weights)
    tl.store(d_scores + b * S + s, de, mask=s < S)
    for h0 in range(0, H, BLOCK_H):
        h = h0 + tl.arange(0, BLOCK_H)
        below = tl.load(d_ctop + b * d_ctop_stride + H + h, mask=h < H, other=0.0).to(tl.float32)
        inside = (s[:, None] < S) & (h[None, :] < H)
        if SCORE == 0:
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=inside, other=0.0)
            below += tl.sum(de[:, None] * k, axis=0)
        tl.store(d_below + b * H + h, below, mask=h < H)
        if SCORE == 1:
            at = b * S * H + s[:, None] * H + h[None, :]
            t = tanh(tl.load(keys + at, mask=inside, other=0.0) + tl.load(q + b * q_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :])
            d_pre = de[:, None] * tl.load(v_a + h, mask=h < H, other=0.0).to(tl.float32)[None, :] * (1.0 - t * t)
            tl.store(d_keys + at, tl.load(d_keys + at, mask=inside, other=0.0) + d_pre, mask=inside)
            total = tl.sum(d_pre, axis=0)
            tl.store(dq + b * Q + h, total, mask=h < H)
            tl.store(dq_c + b * dq_c_stride + h, total.to(dq_c.dtype.element_ty), mask=h < H)
            tl.store(dv_rows + b * H + h, tl.load(dv_rows + b * H + h, mask=h < H, other=0.0) + tl.sum(de[:, None] * t, axis=0), mask=h < H)
    if SCORE == 2:
        _location_back(de, real, s, n, b, P, Q, dq, dq_c, dq_c_stride, BLOCK_P)
    if KIND == 2:
        _predicted_position_back(d_pos, p, nf, b, H, Q, v_p, tanh_u, dz, dq, dq_c, dq_c_stride, BLOCK_H)


@triton.jit
def _feed_tanh(
    bias,
    pre,
    h_tilde,
    fed,
    fed_stride,
    fed_c,
    fed_c_stride,
    fed_mask,
    H,
    HAS_BIAS: tl.constexpr,
    HAS_FED: tl.constexpr,
    HAS_MASK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    x = tl.load(pre + row * H + j, mask=m).to(tl.float32)
    if HAS_BIAS:
        x += tl.load(bias + j, mask=m).to(tl.float32)
    y = tanh(x)
    tl.store(h_tilde + row * H + j, y, mask=m)
    if HAS_FED:
        if HAS_MASK:
            y = y * tl.load(fed_mask + row * H + j, mask=m).to(tl.float32)
        tl.store(fed + row * fed_stride + j, y, mask=m)
        tl.store(fed_c + row * fed_c_stride + j, y.to(fed_c.dtype.element_ty), mask=m)


@triton.jit
def _feed_tanh_back(d_h_tilde, d_fed, d_fed_stride, fed_mask, h_tilde, d_pre, d_pre_c, H, HAS_FED: tl.constexpr, HAS_MASK: tl.constexpr, BLOCK: tl.constexpr):
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


def lstm_cell(s: Any) -> None:
    """The `lstm_cell` stage (stages.py) on its operands `s`."""
    rows, H = s.c_raw.shape
    _lstm_cell[row_grid(rows, H)](
        present_or(s.base, s.gemm),
        row_stride(s.base),
        s.gemm,
        s.gemm.stride(0),
        s.c_prev,
        s.c_prev.stride(0),
        present_or(s.h_prev, s.c_prev),
        row_stride(s.h_prev),
        present_or(s.keep, s.c_prev),
        s.gates,
        s.c_raw,
        s.tanh_c,
        s.c_next,
        s.c_next.stride(0),
        s.h_next,
        s.h_next.stride(0),
        s.h_next_c,
        s.h_next_c.stride(0),
        present_or(s.fwd, s.c_raw),
        row_stride(s.fwd),
        present_or(s.fwd_c, s.h_next_c),
        row_stride(s.fwd_c),
        present_or(s.fwd_mask, s.c_raw),
        s.clip or 0.0,
        H,
        HAS_BASE=s.base is not None,
        HAS_KEEP=s.keep is not None,
        HAS_CLIP=s.clip is not None,
        HAS_FWD=s.fwd is not None,
        HAS_FWD_C=s.fwd_c is not None,
        HAS_FWD_MASK=s.fwd_mask is not None,
        BLOCK=BLOCK,
    )


def lstm_cell_back(s: Any) -> None:
    """The `lstm_cell_back` stage (stages.py) on its operands `s`."""
    rows, H = s.dc.shape
    first = rows - s.extra.shape[0] if s.extra is not None else rows
    _lstm_cell_back[row_grid(rows, H)](
        present_or(s.rest, s.dc),
        present_or(s.own, s.below),
        row_stride(s.own),
        s.below,
        s.below.stride(0),
        present_or(s.below_mask, s.dc),
        present_or(s.extra, s.dc),
        row_stride(s.extra),
        first,
        present_or(s.keep, s.dc),
        s.dc,
        s.gates,
        s.c_prev,
        s.c_prev.stride(0),
        s.tanh_c,
        s.c_raw,
        s.clip or 0.0,
        s.d_gates,
        s.d_gates_c,
        H,
        HAS_REST=s.rest is not None,
        HAS_OWN=s.own is not None,
        HAS_BELOW_MASK=s.below_mask is not None,
        HAS_EXTRA=s.extra is not None,
        HAS_KEEP=s.keep is not None,
        HAS_CLIP=s.clip is not None,
        BLOCK=BLOCK,
    )


def _slots(score: str, kind: str, Q: int, H: int) -> int:
    """The location score's slots: the query product's columns before local-p's (0 for the other scores)."""
    return Q - (H if kind == "local-p" else 0) if score == "location" else 0


def _inverse_two_variance(kind: str, window: int) -> float:
    """1 / 2σ² of local-p's Gaussian, σ = D/2 (unused by the other kinds)."""
    return 1.0 / (2 * (window / 2) ** 2) if kind == "local-p" else 0.0


def luong_attention(s: Any) -> None:
    """The `luong_attention` stage (stages.py) on its operands `s`."""
    B, S, H = s.ann.shape
    Q = s.q.shape[1] if s.q is not None else 0
    _luong_attention[(B,)](
        s.top,
        s.top.stride(0),
        present_or(s.q, s.top),
        row_stride(s.q),
        s.keys,
        s.mask,
        s.ann,
        present_or(s.v_a, s.top),
        present_or(s.v_p, s.top),
        s.alpha,
        present_or(s.soft, s.alpha),
        s.ctx,
        s.ctx_c,
        s.ctx_c.stride(0),
        present_or(s.pos, s.alpha),
        present_or(s.tanh_u, s.ctx),
        S,
        H,
        Q,
        _slots(s.score, s.kind, Q, H),
        s.step,
        s.window,
        _inverse_two_variance(s.kind, s.window),
        SCORE=s.score_code,
        KIND=s.kind_code,
        REVERSED=s.reversed_source,
        BLOCK_S=positions_block(S),
        BLOCK_H=columns_block(S),
        num_warps=ATTENTION_WARPS,
    )


def luong_attention_back(s: Any) -> None:
    """The `luong_attention_back` stage (stages.py) on its operands `s`."""
    B, S, H = s.ann.shape
    Q = s.dq.shape[1] if s.dq is not None else 0
    _luong_attention_back[(B,)](
        s.d_ctop,
        s.d_ctop.stride(0),
        present_or(s.d_alpha, s.alpha),
        s.ann,
        s.alpha,
        present_or(s.soft, s.alpha),
        s.keys,
        present_or(s.q, s.d_ctop),
        row_stride(s.q),
        s.mask,
        present_or(s.v_a, s.d_below),
        present_or(s.v_p, s.d_below),
        present_or(s.pos, s.alpha),
        present_or(s.tanh_u, s.d_below),
        s.d_ctx,
        s.d_scores,
        s.d_below,
        present_or(s.dq, s.d_below),
        present_or(s.dq_c, s.d_ctop),
        row_stride(s.dq_c),
        present_or(s.d_keys, s.ann),
        present_or(s.dv_rows, s.d_below),
        present_or(s.dz, s.alpha),
        S,
        H,
        Q,
        _slots(s.score, s.kind, Q, H),
        s.window,
        _inverse_two_variance(s.kind, s.window),
        SCORE=s.score_code,
        KIND=s.kind_code,
        REVERSED=s.reversed_source,
        HAS_DALPHA=s.d_alpha is not None,
        BLOCK_S=positions_block(S),
        BLOCK_H=columns_block(S),
        BLOCK_P=positions_block(max(_slots(s.score, s.kind, Q, H), 1)),
        num_warps=ATTENTION_WARPS,
    )


def feed_tanh(s: Any) -> None:
    """The `feed_tanh` stage (stages.py) on its operands `s`."""
    rows, H = s.h_tilde.shape
    _feed_tanh[row_grid(rows, H)](
        present_or(s.bias, s.pre),
        s.pre,
        s.h_tilde,
        present_or(s.fed, s.h_tilde),
        row_stride(s.fed),
        present_or(s.fed_c, s.pre),
        row_stride(s.fed_c),
        present_or(s.fed_mask, s.h_tilde),
        H,
        HAS_BIAS=s.bias is not None,
        HAS_FED=s.fed is not None,
        HAS_MASK=s.fed_mask is not None,
        BLOCK=BLOCK,
    )


def feed_tanh_back(s: Any) -> None:
    """The `feed_tanh_back` stage (stages.py) on its operands `s`."""
    rows, H = s.h_tilde.shape
    _feed_tanh_back[row_grid(rows, H)](
        s.d_h_tilde,
        present_or(s.d_fed, s.d_h_tilde),
        row_stride(s.d_fed),
        present_or(s.fed_mask, s.h_tilde),
        s.h_tilde,
        s.d_pre,
        s.d_pre_c,
        H,
        HAS_FED=s.d_fed is not None,
        HAS_MASK=s.fed_mask is not None,
        BLOCK=BLOCK,
    )
