"""The GRU step's stages: its gates and r∘h, its candidate and new state, and their gradients, each one kernel between
the step's matrix products (loops.py). Each stage's operands, torch reference and Triton kernel (one launch).

GroundHog's RecurrentLayer.step_fprop (groundhog/layers/rec_layers.py) and gru.py's equations; the gradients are
gru.py's `candidate_grad`, `gates_grad` and `previous_state_grad`, which fused.py's backward reads too.
"""

from __future__ import annotations

import torch
from torch import Tensor

from rnnmt.models import gru
from rnnmt.recurrence.kernels.stages import Stage, launch, stage, widened, widened_sum
from rnnmt.recurrence.kernels.triton_common import BLOCK, jit, row_grid, tanh, tl


@stage("gru_gates")
class GRUGates(Stage):
    """gates = σ(x[:, :2H] [+ xc[:, :2H]] + g) (gru.gates of the sum); rh = r∘h, also in rh_c's dtype."""

    x: Tensor
    xc: Tensor | None
    g: Tensor  # U_zr h
    h: Tensor
    gates: Tensor
    rh: Tensor
    rh_c: Tensor

    def reference(self) -> None:
        H = self.h.shape[1]
        gru.gates(torch.add(widened_sum(self.x[:, : 2 * H], self.xc[:, : 2 * H] if self.xc is not None else None), widened(self.g), out=self.gates))
        torch.mul(self.gates[:, H:], self.h, out=self.rh)
        self.rh_c.copy_(self.rh)

    def launch(self) -> None:
        launch(_gru_gates, self, row_grid(*self.h.shape), H=self.h.shape[1], BLOCK=BLOCK)


@jit
def _gru_gates(x, x_stride, xc, xc_stride, g, g_stride, h, h_stride, gates, rh, rh_c, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre_z = tl.load(x + row * x_stride + j, mask=m).to(tl.float32)
    pre_r = tl.load(x + row * x_stride + H + j, mask=m).to(tl.float32)
    if xc is not None:
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


@stage("gru_state")
class GRUState(Stage):
    """h̃ = tanh(x[:, 2H:] [+ xc[:, 2H:]] + u) into cand (gru.candidate); h' = h + keep∘z∘(h̃ − h) into out and out_c
    (gru.interpolate)."""

    x: Tensor
    xc: Tensor | None
    u: Tensor  # U (r∘h)
    gates: Tensor
    h: Tensor
    keep: Tensor | None
    cand: Tensor
    out: Tensor
    out_c: Tensor

    def reference(self) -> None:
        H = self.h.shape[1]
        gru.candidate(torch.add(widened_sum(self.x[:, 2 * H :], self.xc[:, 2 * H :] if self.xc is not None else None), widened(self.u), out=self.cand))
        gru.interpolate(self.h, self.gates[:, :H], self.cand, self.keep, out=self.out)
        self.out_c.copy_(self.out)

    def launch(self) -> None:
        launch(_gru_state, self, row_grid(*self.h.shape), H=self.h.shape[1], BLOCK=BLOCK)


@jit
def _gru_state(x, x_stride, xc, xc_stride, u, gates, h, h_stride, keep, cand, out, out_stride, out_c, out_c_stride, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    pre = tl.load(x + row * x_stride + 2 * H + j, mask=m).to(tl.float32)
    if xc is not None:
        pre += tl.load(xc + row * xc_stride + 2 * H + j, mask=m).to(tl.float32)
    c = tanh(pre + tl.load(u + row * H + j, mask=m).to(tl.float32))
    tl.store(cand + row * H + j, c, mask=m)
    h_prev = tl.load(h + row * h_stride + j, mask=m).to(tl.float32)
    step = (c - h_prev) * tl.load(gates + row * 2 * H + j, mask=m)
    if keep is not None:
        step *= tl.load(keep + row).to(tl.float32)
    new = h_prev + step
    tl.store(out + row * out_stride + j, new, mask=m)
    tl.store(out_c + row * out_c_stride + j, new.to(out_c.dtype.element_ty), mask=m)


@stage("gru_back_cand")
class GRUBackCand(Stage):
    """dh = base + recurrent [+ extra] (the gradient of a step's new state: the later step's, its products with U_zr
    (and W_a), and the loss's); d(h̃'s pre-activation) into dx[:, 2H:] and dx_c (gru.candidate_grad)."""

    base: Tensor
    recurrent: Tensor
    extra: Tensor | None
    gates: Tensor
    cand: Tensor
    keep: Tensor | None
    dh: Tensor
    dx: Tensor
    dx_c: Tensor

    def reference(self) -> None:
        H = self.base.shape[1]
        torch.add(self.base, widened(self.recurrent), out=self.dh)
        if self.extra is not None:
            self.dh += widened(self.extra)
        dstep = self.dh * self.keep if self.keep is not None else self.dh
        gru.candidate_grad(dstep, self.gates[:, :H], self.cand, out=self.dx[:, 2 * H :])
        self.dx_c[:, 2 * H :] = self.dx[:, 2 * H :]

    def launch(self) -> None:
        launch(_gru_back_cand, self, row_grid(*self.base.shape), H=self.base.shape[1], BLOCK=BLOCK)


@jit
def _gru_back_cand(base, recurrent, recurrent_stride, extra, gates, cand, keep, dh, dx, dx_c, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    total = tl.load(base + row * H + j, mask=m) + tl.load(recurrent + row * recurrent_stride + j, mask=m).to(tl.float32)
    if extra is not None:
        total += tl.load(extra + row * H + j, mask=m).to(tl.float32)
    tl.store(dh + row * H + j, total, mask=m)
    dstep = total
    if keep is not None:
        dstep *= tl.load(keep + row).to(tl.float32)
    c = tl.load(cand + row * H + j, mask=m)
    dxh = dstep * tl.load(gates + row * 2 * H + j, mask=m) * (1.0 - c * c)
    tl.store(dx + row * 3 * H + 2 * H + j, dxh, mask=m)
    tl.store(dx_c + row * 3 * H + 2 * H + j, dxh.to(dx_c.dtype.element_ty), mask=m)


@stage("gru_back_gates")
class GRUBackGates(Stage):
    """d(z, r pre-activations) into dx[:, :2H], dx_c and dzr_c (gru.gates_grad); base = dh + drh∘r − dstep∘z, the
    previous state's gradient but for U_zr's product (gru.previous_state_grad)."""

    dh: Tensor
    drh: Tensor
    gates: Tensor
    cand: Tensor
    h: Tensor
    keep: Tensor | None
    dx: Tensor
    dx_c: Tensor
    dzr_c: Tensor
    base: Tensor

    def reference(self) -> None:
        H = self.dh.shape[1]
        z, r = self.gates[:, :H], self.gates[:, H:]
        dstep = self.dh * self.keep if self.keep is not None else self.dh
        d_rh = widened(self.drh)
        gru.gates_grad(dstep, d_rh, self.h, z, r, self.cand, out=self.dx[:, : 2 * H])
        self.dx_c[:, : 2 * H] = self.dx[:, : 2 * H]
        self.dzr_c[:, : 2 * H] = self.dx[:, : 2 * H]
        gru.previous_state_grad(self.base.copy_(self.dh), d_rh, r, dstep, z)

    def launch(self) -> None:
        launch(_gru_back_gates, self, row_grid(*self.dh.shape), H=self.dh.shape[1], BLOCK=BLOCK)


@jit
def _gru_back_gates(dh, drh, gates, cand, h, h_stride, keep, dx, dx_c, dzr_c, dzr_c_stride, base, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    total = tl.load(dh + row * H + j, mask=m)
    dstep = total
    if keep is not None:
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
    tl.store(dzr_c + row * dzr_c_stride + j, dz.to(dzr_c.dtype.element_ty), mask=m)
    tl.store(dzr_c + row * dzr_c_stride + H + j, dr.to(dzr_c.dtype.element_ty), mask=m)
    tl.store(base + row * H + j, total + d_rh * r - dstep * z, mask=m)
