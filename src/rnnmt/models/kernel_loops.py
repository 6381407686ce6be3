"""The GRU and attention-decoder loops of recurrence.py with each step's pointwise work as single kernels
(`train.recurrence: kernels`, kernels.py): the GPU path, few kernels per step.

The equations and the saved values are those of recurrence.py's `GRUScan` and `AttentiveGRULoop`
(GroundHog's rec_layers.py and encdec.py, paper-spec §1.2–1.4). What changes is how a step is cut into
launches, forward and backward:

- GRU step: the product U_zr h, one kernel for the gates and r∘h, the product U(r∘h), one kernel for h̃
  and the new state; back: one kernel for h̃'s gradient, the product with U, one kernel for the gates'
  gradients, the product with U_zr. Every state is also kept in the products' dtype, written by the
  kernel that makes it, so no cast runs per step.
- Both directions of the bidirectional encoder run in one loop, the backward direction over its inputs
  reversed once per update: each step's products are one batched product over the two directions and
  each kernel covers both.
- Attention decoder step: one product [W_a; U_zr] s (the query and the gates' recurrent term read the same
  state), one kernel for energies, softmax and context, the product C c, then the GRU step's kernels;
  back: the GRU step's kernels, C's product, one kernel for the attention's gradients (context, softmax,
  tanh, the keys' accumulated gradient and the query's), and one product [U_zr; W_a]ᵀ for both terms of
  the previous state's gradient.

Weight gradients are one product each over all steps after the loop, as in recurrence.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rnnmt.models import kernels
from rnnmt.models.recurrence import Precision, explicit_precision


def _companion(p: Precision, x: Tensor, *shape: int) -> Tensor:
    """A buffer in the products' dtype, zeroed (rows that no step writes must read as 0)."""
    return torch.zeros(*shape, dtype=p.compute, device=x.device)


def _flat(x: Tensor) -> Tensor:
    """[D, B, N] -> [D·B, N] rows (a view)."""
    return x.reshape(-1, x.shape[-1])


def _product_grad(p: Precision, d_out: Tensor, inputs: Tensor) -> Tensor:
    """Σ over every leading index of d_outᵀ·inputs in the products' dtype, as float32: [..., O], [..., I] -> [O, I]."""
    return torch.mm(d_out.reshape(-1, d_out.shape[-1]).t().to(p.compute), inputs.reshape(-1, inputs.shape[-1]).to(p.compute)).to(p.acc)


class GRUScanKernels(torch.autograd.Function):
    """GRUs over D directions at once: x [D, B, T, 3H] (a reversed direction's inputs already reversed), h0
    [D, B, H], keep [D, B, T] (1 real, 0 padding: the state carries over) or None, and per direction
    U_zr [D, 2H, H], U [D, H, H], b [D, H]. Returns the states [D, B, T, H] in each direction's own order."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, keep: Tensor | None, U_gates: Tensor, U_cand: Tensor, b_cand: Tensor) -> Tensor:
        D, B, T, H3 = x.shape
        H, p = H3 // 3, ctx.precision
        xs = x.permute(2, 0, 1, 3).to(p.acc, memory_format=torch.contiguous_format, copy=True)  # [T, D, B, 3H]
        xs[..., 2 * H :] += b_cand.to(p.acc).unsqueeze(1)
        keeps = keep.permute(2, 0, 1).to(p.acc).contiguous() if keep is not None else None  # [T, D, B]
        states, states_c = p.buffer(x, T + 1, D, B, H), _companion(p, x, T + 1, D, B, H)
        states[0], states_c[0] = h0, h0
        gates, rh, cand = p.buffer(x, T, D, B, 2 * H), p.buffer(x, T, D, B, H), p.buffer(x, T, D, B, H)
        rh_c, g, u = _companion(p, x, D, B, H), _companion(p, x, D, B, 2 * H), _companion(p, x, D, B, H)
        Ug_t, Uc_t = U_gates.transpose(1, 2).to(p.compute), U_cand.transpose(1, 2).to(p.compute)
        for t in range(T):
            k = _flat(keeps[t].unsqueeze(-1)) if keeps is not None else None
            torch.bmm(states_c[t], Ug_t, out=g)
            kernels.gru_gates(_flat(xs[t]), None, _flat(g), _flat(states[t]), _flat(gates[t]), _flat(rh[t]), _flat(rh_c))
            torch.bmm(rh_c, Uc_t, out=u)
            kernels.gru_state(_flat(xs[t]), None, _flat(u), _flat(gates[t]), _flat(states[t]), k, _flat(cand[t]), _flat(states[t + 1]),
                              _flat(states_c[t + 1]))  # fmt: skip
        ctx.save_for_backward(states, states_c, gates, rh, cand, keeps, U_gates, U_cand)
        return states[1:].permute(1, 2, 0, 3)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        states, states_c, gates, rh, cand, keeps, U_gates, U_cand = ctx.saved_tensors
        T, D, B, H = cand.shape
        p = ctx.precision
        grads = grad.permute(2, 0, 1, 3).to(p.acc, memory_format=torch.contiguous_format, copy=True)  # [T, D, B, H]
        dx, dx_c = p.buffer(grad, T, D, B, 3 * H), _companion(p, grad, T, D, B, 3 * H)
        base, m = p.buffer(grad, D, B, H, zero=True), _companion(p, grad, D, B, H)
        dh, drh, dzr_c = p.buffer(grad, D, B, H), _companion(p, grad, D, B, H), _companion(p, grad, D, B, 2 * H)
        Ug, Uc = U_gates.to(p.compute), U_cand.to(p.compute)
        for t in range(T - 1, -1, -1):
            k = _flat(keeps[t].unsqueeze(-1)) if keeps is not None else None
            kernels.gru_back_cand(_flat(base), _flat(m), _flat(grads[t]), None, _flat(gates[t]), _flat(cand[t]), k, _flat(dh), _flat(dx[t]), _flat(dx_c[t]))
            torch.bmm(dx_c[t, ..., 2 * H :], Uc, out=drh)
            kernels.gru_back_gates(_flat(dh), _flat(drh), _flat(gates[t]), _flat(cand[t]), _flat(states[t]), k, _flat(dx[t]), _flat(dx_c[t]),
                                   _flat(dzr_c), _flat(base))  # fmt: skip
            torch.bmm(dzr_c, Ug, out=m)
        dh0 = base + m.to(p.acc)
        by_direction = (lambda a: a.transpose(0, 1))  # [T, D, ...] -> [D, T, ...]: one product per direction
        dU_gates = torch.stack([_product_grad(p, by_direction(dx_c[..., : 2 * H])[d], by_direction(states_c[:-1])[d]) for d in range(D)])
        dU_cand = torch.stack([_product_grad(p, by_direction(dx_c[..., 2 * H :])[d], by_direction(rh)[d]) for d in range(D)])
        db = dx[..., 2 * H :].sum((0, 2))
        return dx.permute(1, 2, 0, 3), dh0, None, dU_gates, dU_cand, db


class AttentiveGRUKernels(torch.autograd.Function):
    """recurrence.AttentiveGRULoop (same inputs and outputs: the queries s_{t−1}, contexts and weights) in kernels."""

    @staticmethod
    @explicit_precision
    def forward(
        ctx: Any, s0: Tensor, x: Tensor, keys: Tensor, annotations: Tensor, mask: Tensor,
        W_a: Tensor, v_a: Tensor, C_in: Tensor, U_gates: Tensor, U_cand: Tensor, b_cand: Tensor,
    ) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
        B, T, H3 = x.shape
        H, S, A, C, p = H3 // 3, keys.shape[1], keys.shape[2], annotations.shape[2], ctx.precision
        xs = p.steps_first(x)
        xs[..., 2 * H :] += b_cand
        keys, annotations = keys.to(p.acc).contiguous(), annotations.to(p.acc).contiguous()
        real = mask.to(p.acc)
        states, states_c = p.buffer(x, T, B, H), _companion(p, x, T, B, H)
        states[0], states_c[0] = s0, s0
        contexts, tanh, alphas = p.buffer(x, T, B, C), p.buffer(x, T, B, S, A), p.buffer(x, T, B, S)
        gates, rh, cand = p.buffer(x, T, B, 2 * H), p.buffer(x, T, B, H), p.buffer(x, T, B, H)
        ctx_c, rh_c, qg, xc, u = (_companion(p, x, B, n) for n in (C, H, A + 2 * H, 3 * H, H))
        v = v_a.reshape(A).to(p.acc)
        W_qg = torch.cat([W_a, U_gates]).t().to(p.compute)  # [H, A + 2H]: the query and the gates' recurrent term
        C_t, Uc_t = C_in.t().to(p.compute), U_cand.t().to(p.compute)
        for t in range(T):
            torch.mm(states_c[t], W_qg, out=qg)
            kernels.additive_attention(keys, qg[:, :A], v, real, annotations, tanh[t], alphas[t], contexts[t], ctx_c)
            if t + 1 < T:
                torch.mm(ctx_c, C_t, out=xc)
                kernels.gru_gates(xs[t], xc, qg[:, A:], states[t], gates[t], rh[t], rh_c)
                torch.mm(rh_c, Uc_t, out=u)
                kernels.gru_state(xs[t], xc, u, gates[t], states[t], None, cand[t], states[t + 1], states_c[t + 1])
        ctx.save_for_backward(states, states_c, contexts, alphas, tanh, gates, rh, cand, annotations, W_a, v_a, C_in, U_gates, U_cand)
        return states.transpose(0, 1), contexts.transpose(0, 1), alphas.transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_states: Tensor, d_contexts: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        states, states_c, contexts, alphas, tanh, gates, rh, cand, annotations, W_a, v_a, C_in, U_gates, U_cand = ctx.saved_tensors
        T, B, H = states.shape
        S, A, C, p = tanh.shape[2], tanh.shape[3], contexts.shape[2], ctx.precision
        d_states, d_contexts = p.steps_first(d_states), p.steps_first(d_contexts)
        d_alphas = p.steps_first(d_alphas) if d_alphas is not None else None
        dx, dx_c = p.buffer(states, T, B, 3 * H, zero=True), _companion(p, states, T, B, 3 * H)  # the last step's rows stay 0
        dc_all, de_all, dq_all = p.buffer(states, T, B, C), p.buffer(states, T, B, S), p.buffer(states, T, B, A)
        d_keys = p.buffer(states, B, S, A, zero=True)
        base, dh = p.buffer(states, B, H, zero=True), p.buffer(states, B, H)
        # [dz dr | dq] in the products' dtype: one product with [U_zr; W_a] gives both terms of the previous state's gradient.
        zq, mgq, drh, dcx = _companion(p, states, B, 2 * H + A), _companion(p, states, B, H), _companion(p, states, B, H), _companion(p, states, B, C)
        v = v_a.reshape(A).to(p.acc)
        W_zq = torch.cat([U_gates, W_a]).to(p.compute)  # [2H + A, H]
        C_m, Uc = C_in.to(p.compute), U_cand.to(p.compute)
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                kernels.gru_back_cand(base, mgq, d_states[t + 1], None, gates[t], cand[t], None, dh, dx[t], dx_c[t])
                torch.mm(dx_c[t, :, 2 * H :], Uc, out=drh)
                kernels.gru_back_gates(dh, drh, gates[t], cand[t], states[t], None, dx[t], dx_c[t], zq, base)
                torch.mm(dx_c[t], C_m, out=dcx)
            kernels.additive_attention_back(d_contexts[t], dcx if t + 1 < T else None, d_alphas[t] if d_alphas is not None else None, annotations,
                                            alphas[t], v, tanh[t], dc_all[t], de_all[t], d_keys, dq_all[t], zq[:, 2 * H :])  # fmt: skip
            torch.mm(zq, W_zq, out=mgq)
        ds0 = base + mgq.to(p.acc) + d_states[0]
        dW_a = _product_grad(p, dq_all, states_c)
        dv = (de_all.reshape(1, -1) @ tanh.reshape(-1, A)).reshape(v_a.shape)
        dC_in = _product_grad(p, dx_c, contexts)
        d_annotations = torch.bmm(alphas.permute(1, 2, 0), dc_all.transpose(0, 1))
        # The GRU ran T − 1 steps, from states[0..T−2].
        dU_gates = _product_grad(p, dx_c[:-1, :, : 2 * H], states_c[:-1])
        dU_cand = _product_grad(p, dx_c[:-1, :, 2 * H :], rh[:-1])
        db = dx[:-1, :, 2 * H :].sum((0, 1))
        return ds0, dx.transpose(0, 1), d_keys, d_annotations, None, dW_a, dv, dC_in, dU_gates, dU_cand, db


def scan_directions(
    x: list[Tensor], mask: Tensor | None, reverse: list[bool], h0: list[Tensor], weights: list[tuple[Tensor, Tensor, Tensor]]
) -> list[Tensor]:
    """GRUs over the same positions in one loop (GRUScanKernels): per direction the projected inputs [B, T, 3H],
    whether it runs right to left, h0 [B, H] and (U_zr, U, b); returns each direction's states [B, T, H]."""
    flip = [(lambda a: a.flip(1)) if r else (lambda a: a) for r in reverse]
    keep = torch.stack([f(mask) for f in flip]) if mask is not None else None
    stacked = [torch.stack(ws) for ws in zip(*weights)]
    states = GRUScanKernels.apply(torch.stack([f(a) for f, a in zip(flip, x)]), torch.stack(h0), keep, *stacked)
    return [f(s) for f, s in zip(flip, states.unbind(0))]
