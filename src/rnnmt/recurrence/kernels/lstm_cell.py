"""The LSTM cell's stages: a step of the stacked LSTM (the encoder's waves and Luong's decoder, loops.py) and its
gradient, each one kernel after the step's product [W_ih W_hh]·[x; h]. Each stage's operands, torch reference
(lstm.py's `cell`, `clipped_cell_grad` and `cell_backward`, which fused.py reads too) and Triton kernel.

nmt.matlab's code/layers/lstmUnitForward.m and lstmUnitBackprop.m (gates stacked i, f, o, a there; torch's i, f, g, o
here); the carried cell is clipped to ±clip after h is computed, as Luong's code does.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rnnmt.models import lstm
from rnnmt.recurrence.kernels.stages import Stage, launch, stage, widened, widened_sum
from rnnmt.recurrence.kernels.triton_common import BLOCK, jit, row_grid, tanh, tl


@stage("lstm_cell")
class LSTMCell(Stage):
    """An LSTM step (lstm.cell) from its pre-activations [base +] gemm: the gates, c', tanh(c') and h'; c' clipped to
    ±clip; with keep, both carried over where it is 0 (h_prev, c_prev). h' goes to h_next (and h_next_c); h'∘fwd_mask,
    the next layer's input, to fwd and fwd_c where given."""

    base: Tensor | None
    gemm: Tensor
    c_prev: Tensor
    h_prev: Tensor | None
    keep: Tensor | None
    clip: float | None
    gates: Tensor
    c_raw: Tensor
    tanh_c: Tensor
    c_next: Tensor
    h_next: Tensor
    h_next_c: Tensor
    fwd: Tensor | None
    fwd_c: Tensor | None
    fwd_mask: Tensor | None

    def reference(self) -> None:
        self.gates.copy_(widened_sum(self.gemm, self.base))
        _, c, _, h = lstm.cell(self.gates, self.c_prev, self.c_raw, self.tanh_c)
        c = lstm.clip_cell(c, self.clip)
        h_state = h
        if self.keep is not None:
            h_state, c = self.h_prev + self.keep * (h - self.h_prev), self.c_prev + self.keep * (c - self.c_prev)
        self.c_next.copy_(c)
        self.h_next.copy_(h_state)
        self.h_next_c.copy_(h_state)
        out = h * self.fwd_mask if self.fwd_mask is not None else h
        if self.fwd is not None:
            self.fwd.copy_(out)
        if self.fwd_c is not None:
            self.fwd_c.copy_(out)

    def launch(self) -> None:
        launch(_lstm_cell, self, row_grid(*self.c_raw.shape), H=self.c_raw.shape[1], BLOCK=BLOCK)


@jit
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
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre_i = tl.load(gemm + row * gemm_stride + j, mask=m).to(tl.float32)
    pre_f = tl.load(gemm + row * gemm_stride + H + j, mask=m).to(tl.float32)
    pre_g = tl.load(gemm + row * gemm_stride + 2 * H + j, mask=m).to(tl.float32)
    pre_o = tl.load(gemm + row * gemm_stride + 3 * H + j, mask=m).to(tl.float32)
    if base is not None:
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
    if clip is not None:
        c = tl.minimum(tl.maximum(c, -clip), clip)
    h_state = h
    if keep is not None:
        k = tl.load(keep + row).to(tl.float32)
        h_state = tl.load(h_prev + row * h_prev_stride + j, mask=m) + k * (h - tl.load(h_prev + row * h_prev_stride + j, mask=m))
        c = c_old + k * (c - c_old)
    tl.store(c_next + row * c_next_stride + j, c, mask=m)
    tl.store(h_next + row * h_next_stride + j, h_state, mask=m)
    tl.store(h_next_c + row * h_next_c_stride + j, h_state.to(h_next_c.dtype.element_ty), mask=m)
    out = h
    if fwd_mask is not None:
        out = out * tl.load(fwd_mask + row * H + j, mask=m).to(tl.float32)
    if fwd is not None:
        tl.store(fwd + row * fwd_stride + j, out, mask=m)
    if fwd_c is not None:
        tl.store(fwd_c + row * fwd_c_stride + j, out.to(fwd_c.dtype.element_ty), mask=m)


@stage("lstm_cell_back")
class LSTMCellBack(Stage):
    """The gradient of `lstm_cell`: dh = [own +] [rest +] below[∘below_mask] [+ extra, on the last extra.shape[0] rows];
    with keep, the carried parts (dh into rest, dc) keep what the step did not take; d(pre-activations) into d_gates
    (and d_gates_c); dc becomes dL/dc_prev."""

    rest: Tensor | None
    own: Tensor | None
    below: Tensor
    below_mask: Tensor | None
    extra: Tensor | None
    keep: Tensor | None
    dc: Tensor
    gates: Tensor
    c_prev: Tensor
    tanh_c: Tensor
    c_raw: Tensor
    clip: float | None
    d_gates: Tensor
    d_gates_c: Tensor

    def reference(self) -> None:
        dh = widened(self.below) * self.below_mask if self.below_mask is not None else widened(self.below)
        if self.extra is not None:
            first = dh.shape[0] - self.extra.shape[0]
            dh = torch.cat([dh[:first], dh[first:] + widened(self.extra)])
        if self.rest is not None:
            dh = self.rest + dh
        if self.own is not None:
            dh = widened(self.own) + dh
        dh_new, dc_new = dh, self.dc.clone()
        carried = torch.zeros_like(self.dc)
        if self.keep is not None:
            dh_new, dc_new = dh * self.keep, self.dc * self.keep
            self.rest.copy_(dh - dh_new)
            carried = self.dc - dc_new
        dc_new = lstm.clipped_cell_grad(dc_new, self.c_raw, self.clip)
        torch.add(carried, lstm.cell_backward(dh_new, dc_new, self.gates, self.c_prev, self.tanh_c, self.d_gates), out=self.dc)
        self.d_gates_c.copy_(self.d_gates)

    def launch(self) -> None:
        rows, H = self.dc.shape
        first = rows - self.extra.shape[0] if self.extra is not None else rows
        launch(_lstm_cell_back, self, row_grid(rows, H), extra_first=first, H=H, BLOCK=BLOCK)


@jit
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
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    below_grad = tl.load(below + row * below_stride + j, mask=m).to(tl.float32)
    if below_mask is not None:
        below_grad = below_grad * tl.load(below_mask + row * H + j, mask=m).to(tl.float32)
    if extra is not None:
        mine = m & ((j * 0 + row) >= extra_first)  # only the last rows have an extra term
        below_grad += tl.load(extra + (row - extra_first) * extra_stride + j, mask=mine, other=0.0).to(tl.float32)
    dh = below_grad
    if rest is not None:
        dh = tl.load(rest + row * H + j, mask=m) + dh
    if own is not None:
        dh = tl.load(own + row * own_stride + j, mask=m).to(tl.float32) + dh
    d_cell = tl.load(dc + row * H + j, mask=m)
    dh_new, dc_new = dh, d_cell
    if keep is not None:
        k = tl.load(keep + row).to(tl.float32)
        dh_new, dc_new = dh * k, d_cell * k
        tl.store(rest + row * H + j, dh - dh_new, mask=m)
        d_cell = d_cell - dc_new
    else:
        d_cell = tl.zeros([BLOCK], dtype=tl.float32)
    if clip is not None:
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
