"""The loops with each step's pointwise work as single kernels (`train.recurrence: kernels`, the stages' modules), and
`KernelLoops`, which runs a model's loops with them: the GPU path, few kernels per step.

The equations and the saved values are those of recurrence/fused.py's loops (GroundHog's rec_layers.py and encdec.py,
paper-spec §1.2–1.4; nmt.matlab's for Luong's), and what the two forms share around their steps (what they keep, the
buffers, the weight gradients after the loop) is recurrence/shared.py. What changes is how a step is cut into
launches, forward and backward:

- GRU step: the product U_zr h, one kernel for the gates and r∘h, the product U(r∘h), one kernel for h̃
  and the new state; back: one kernel for h̃'s gradient, the product with U, one kernel for the gates'
  gradients, the product with U_zr. Every state is also kept in the products' dtype, written by the
  kernel that makes it, so no cast runs per step.
- Both directions of the bidirectional encoder run in one loop, the backward direction over its inputs
  reversed once per update: each step's products are one batched product over the two directions and
  each kernel covers both.
- Attention decoder step: one product [W_a; U_zr] s (the query and the gates' recurrent term read the same
  state), the attention stage (energies, softmax and context: two kernels), the product C c, then the GRU
  step's kernels; back: the GRU step's kernels, C's product, the attention's backward stage (context,
  softmax, tanh, the keys' accumulated gradient and the query's: two kernels), and one product
  [U_zr; W_a]ᵀ for both terms of the previous state's gradient.

Weight gradients are one product each over all steps after the loop, as in fused.py. Luong's scores and kinds are
computed by their kernel forms (luong_attention.py's SCORE_FORMS and KIND_FORMS), which say what the loop keeps and
adds up for them and what it ends with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rnnmt.models import lstm
from rnnmt.models.attention import LUONG_KINDS, LUONG_SCORES
from rnnmt.recurrence import shared
from rnnmt.recurrence.kernels.additive_attention import AdditiveStep, AdditiveStepBack
from rnnmt.recurrence.kernels.gru_step import GRUBackCand, GRUBackGates, GRUGates, GRUState
from rnnmt.recurrence.kernels.lstm_cell import LSTMCell, LSTMCellBack
from rnnmt.recurrence.kernels.luong_attention import KIND_FORMS, SCORE_FORMS, FeedTanh, FeedTanhBack, KindForm, LuongStep, LuongStepBack, ScoreForm
from rnnmt.recurrence.precision import Precision, explicit_precision, weight_grad


def _companion(p: Precision, x: Tensor, *shape: int) -> Tensor:
    """A buffer in the products' dtype, zeroed (rows that no step writes must read as 0)."""
    return torch.zeros(*shape, dtype=p.compute, device=x.device)


def _flat(x: Tensor) -> Tensor:
    """[D, B, N] -> [D·B, N] rows (a view)."""
    return x.reshape(-1, x.shape[-1])


class GRUScanKernels(torch.autograd.Function):
    """GRUs over D directions at once: x [D, B, T, 3H] (a reversed direction's inputs already reversed), h0
    [D, B, H], keep [D, B, T] (1 real, 0 padding: the state carries over) or None, and per direction
    U_zr [D, 2H, H], U [D, H, H], b [D, H]. Returns the states [D, B, T, H] in each direction's own order.
    The stages read the directions' rows as one [D·B, ·] block; each product is one batched product over them."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, keep: Tensor | None, U_gates: Tensor, U_cand: Tensor, b_cand: Tensor) -> Tensor:
        D, B, T, H3 = x.shape
        H, R, p = H3 // 3, D * B, ctx.precision
        xs = x.permute(2, 0, 1, 3).to(p.acc, memory_format=torch.contiguous_format, copy=True)  # [T, D, B, 3H]
        xs[..., 2 * H :] += b_cand.to(p.acc).unsqueeze(1)
        xs = xs.view(T, R, H3)
        keeps = keep.permute(2, 0, 1).reshape(T, R, 1).to(p.acc).contiguous() if keep is not None else None
        states, states_c = p.buffer(x, T + 1, R, H), _companion(p, x, T + 1, R, H)
        states[0], states_c[0] = h0.reshape(R, H), h0.reshape(R, H)
        gates, rh, cand = p.buffer(x, T, R, 2 * H), p.buffer(x, T, R, H), p.buffer(x, T, R, H)
        rh_c, g, u = _companion(p, x, R, H), _companion(p, x, R, 2 * H), _companion(p, x, R, H)
        Ug_t, Uc_t = U_gates.transpose(1, 2).to(p.compute), U_cand.transpose(1, 2).to(p.compute)
        by_direction = lambda a: a.view(D, B, a.shape[-1])  # noqa: E731 (the rows as the products read them)
        for t in range(T):
            k = keeps[t] if keeps is not None else None
            torch.bmm(by_direction(states_c[t]), Ug_t, out=by_direction(g))
            GRUGates(x=xs[t], xc=None, g=g, h=states[t], gates=gates[t], rh=rh[t], rh_c=rh_c).run()
            torch.bmm(by_direction(rh_c), Uc_t, out=by_direction(u))
            GRUState(x=xs[t], xc=None, u=u, gates=gates[t], h=states[t], keep=k, cand=cand[t], out=states[t + 1], out_c=states_c[t + 1]).run()
        shared.save(ctx, states=states, states_c=states_c, gates=gates, rh=rh, cand=cand, keeps=keeps, U_gates=U_gates, U_cand=U_cand)
        return states[1:].view(T, D, B, H).permute(1, 2, 0, 3)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        states, states_c, gates, cand, keeps = s.states, s.states_c, s.gates, s.cand, s.keeps
        D, B, T, H = grad.shape
        R, p = D * B, ctx.precision
        grads = grad.permute(2, 0, 1, 3).to(p.acc, memory_format=torch.contiguous_format, copy=True).view(T, R, H)
        dx, dx_c = p.buffer(grad, T, R, 3 * H), _companion(p, grad, T, R, 3 * H)
        base, m = p.buffer(grad, R, H, zero=True), _companion(p, grad, R, H)
        dh, drh, dzr_c = p.buffer(grad, R, H), _companion(p, grad, R, H), _companion(p, grad, R, 2 * H)
        Ug, Uc = s.U_gates.to(p.compute), s.U_cand.to(p.compute)
        by_direction = lambda a: a.view(*a.shape[:-2], D, B, a.shape[-1])  # noqa: E731
        for t in range(T - 1, -1, -1):
            k = keeps[t] if keeps is not None else None
            GRUBackCand(base=base, recurrent=m, extra=grads[t], gates=gates[t], cand=cand[t], keep=k, dh=dh, dx=dx[t], dx_c=dx_c[t]).run()
            torch.bmm(by_direction(dx_c[t, :, 2 * H :]), Uc, out=by_direction(drh))
            GRUBackGates(dh=dh, drh=drh, gates=gates[t], cand=cand[t], h=states[t], keep=k, dx=dx[t], dx_c=dx_c[t], dzr_c=dzr_c, base=base).run()
            torch.bmm(by_direction(dzr_c), Ug, out=by_direction(m))
        dh0 = (base + m.to(p.acc)).view(D, B, H)
        per_direction = lambda a: by_direction(a).transpose(0, 1)  # noqa: E731 ([T, R, ·] -> [D, T, B, ·]: one product per direction)
        grads = [shared.gru_weight_grads(p, per_direction(dx_c)[d], per_direction(states_c[:-1])[d], per_direction(s.rh)[d]) for d in range(D)]
        dU_gates, dU_cand = (torch.stack(g) for g in zip(*grads))
        db = by_direction(dx[..., 2 * H :]).sum((0, 2))
        return by_direction(dx).permute(1, 2, 0, 3), dh0, None, dU_gates, dU_cand, db


class AttentiveGRUKernels(torch.autograd.Function):
    """recurrence.AttentiveGRULoop (same inputs and outputs: the queries s_{t−1}, contexts and weights) in kernels."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, s0: Tensor, x: Tensor, keys: Tensor, annotations: Tensor, mask: Tensor, *weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        W_a, v_a, C_in, U_gates, U_cand, b_cand = weights  # AdditiveAttention.loop_weights, then the GRU's C, U_zr, U, b
        B, T, H3 = x.shape
        H, A, C, p = H3 // 3, keys.shape[2], annotations.shape[2], ctx.precision
        xs = shared.gru_inputs(p, x, b_cand)
        keys, annotations = keys.to(p.acc).contiguous(), annotations.to(p.acc).contiguous()
        real = mask.to(p.acc)
        b = shared.AttentiveBuffers.start(p, x, s0, keys, annotations)
        states, contexts, tanh, alphas, gates, rh, cand = b.states, b.contexts, b.tanh, b.alphas, b.gates, b.rh, b.cand
        states_c = _companion(p, x, T, B, H)  # the states in the products' dtype
        states_c[0] = s0
        ctx_c, rh_c, qg, xc, u = (_companion(p, x, B, n) for n in (C, H, A + 2 * H, 3 * H, H))
        v = v_a.reshape(A).to(p.acc)
        W_qg = torch.cat([W_a, U_gates]).t().to(p.compute)  # [H, A + 2H]: the query and the gates' recurrent term
        C_t, Uc_t = C_in.t().to(p.compute), U_cand.t().to(p.compute)
        for t in range(T):
            torch.mm(states_c[t], W_qg, out=qg)
            AdditiveStep(keys=keys, q=qg[:, :A], v=v, mask=real, ann=annotations, terms=tanh[t], alpha=alphas[t], ctx=contexts[t], ctx_c=ctx_c).run()
            if t + 1 < T:
                torch.mm(ctx_c, C_t, out=xc)
                GRUGates(x=xs[t], xc=xc, g=qg[:, A:], h=states[t], gates=gates[t], rh=rh[t], rh_c=rh_c).run()
                torch.mm(rh_c, Uc_t, out=u)
                GRUState(x=xs[t], xc=xc, u=u, gates=gates[t], h=states[t], keep=None, cand=cand[t], out=states[t + 1], out_c=states_c[t + 1]).run()
        shared.save(ctx, buffers=b, states_c=states_c, annotations=annotations, W_a=W_a, v_a=v_a, C_in=C_in, U_gates=U_gates, U_cand=U_cand)
        return b.outputs()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_states: Tensor, d_contexts: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        b, states_c = s.buffers, s.states_c
        states, alphas, tanh, gates, cand = b.states, b.alphas, b.tanh, b.gates, b.cand
        T, B, H = states.shape
        S, A, C, p = tanh.shape[2], tanh.shape[3], b.contexts.shape[2], ctx.precision
        d_states, d_contexts = p.steps_first(d_states), p.steps_first(d_contexts)
        d_alphas = p.steps_first(d_alphas) if d_alphas is not None else None
        dx, dx_c = p.buffer(states, T, B, 3 * H, zero=True), _companion(p, states, T, B, 3 * H)  # the last step's rows stay 0
        dc_all, de_all, dq_all = p.buffer(states, T, B, C), p.buffer(states, T, B, S), p.buffer(states, T, B, A)
        d_keys = p.buffer(states, B, S, A, zero=True)
        base, dh = p.buffer(states, B, H, zero=True), p.buffer(states, B, H)
        # [dz dr | dq] in the products' dtype: one product with [U_zr; W_a] gives both terms of the previous state's gradient.
        zq, mgq, drh, dcx = _companion(p, states, B, 2 * H + A), _companion(p, states, B, H), _companion(p, states, B, H), _companion(p, states, B, C)
        v = s.v_a.reshape(A).to(p.acc)
        W_zq = torch.cat([s.U_gates, s.W_a]).to(p.compute)  # [2H + A, H]
        C_m, Uc = s.C_in.to(p.compute), s.U_cand.to(p.compute)
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                GRUBackCand(base=base, recurrent=mgq, extra=d_states[t + 1], gates=gates[t], cand=cand[t], keep=None, dh=dh, dx=dx[t], dx_c=dx_c[t]).run()
                torch.mm(dx_c[t, :, 2 * H :], Uc, out=drh)
                GRUBackGates(dh=dh, drh=drh, gates=gates[t], cand=cand[t], h=states[t], keep=None, dx=dx[t], dx_c=dx_c[t], dzr_c=zq, base=base).run()
                torch.mm(dx_c[t], C_m, out=dcx)
            AdditiveStepBack(
                d_ctx=d_contexts[t],
                dcx=dcx if t + 1 < T else None,
                d_alpha=d_alphas[t] if d_alphas is not None else None,
                ann=s.annotations,
                alpha=alphas[t],
                v=v,
                terms=tanh[t],
                dc=dc_all[t],
                de=de_all[t],
                d_keys=d_keys,
                dq=dq_all[t],
                dq_c=zq[:, 2 * H :],
            ).run()
            torch.mm(zq, W_zq, out=mgq)
        ds0 = base + mgq.to(p.acc) + d_states[0]
        weights = b.weight_grads(p, s.v_a, dq_all, de_all, dx, products=(dx_c, states_c))
        return ds0, dx.transpose(0, 1), d_keys, shared.annotations_grad(alphas, dc_all), None, *weights


def scan_directions(x: list[Tensor], mask: Tensor | None, reverse: list[bool], h0: list[Tensor], weights: list[tuple[Tensor, Tensor, Tensor]]) -> list[Tensor]:
    """GRUs over the same positions in one loop (GRUScanKernels): per direction the projected inputs [B, T, 3H],
    whether it runs right to left, h0 [B, H] and (U_zr, U, b); returns each direction's states [B, T, H]."""
    flip = [(lambda a: a.flip(1)) if r else (lambda a: a) for r in reverse]
    keep = torch.stack([f(mask) for f in flip]) if mask is not None else None
    stacked = [torch.stack(ws) for ws in zip(*weights)]
    states = GRUScanKernels.apply(torch.stack([f(a) for f, a in zip(flip, x)]), torch.stack(h0), keep, *stacked)
    return [f(s) for f, s in zip(flip, states.unbind(0))]


class LSTMStackKernels(torch.autograd.Function):
    """lstm.scan's stacked LSTM encoder (every layer of recurrence.LSTMScan, dropout between layers; masked
    positions carry h and c over; optional clipping of the carried cell) with all layers in one loop.

    Layer l runs step t in wave w = t + l, so each wave is one batched product [W_ih W_hh]·[x; h] over the
    layers and one kernel for all their cells (the layers' buffers are indexed by wave; a layer outside its
    steps has keep 0 and carries its state). Layer 1's input part is zero, its input projection (all steps,
    done before) the cell's base. Inputs: x1 [B, T, 4H] (W_ih x + b of layer 1), mask [B, T], clip, the
    inverted-dropout multipliers between layers [L − 1, B, T, H] or None, then W_hh of layer 1 and W_ih,
    W_hh, bias (or None) of each layer above. Returns the top layer's states [B, T, H] and every layer's
    final h and c [L, B, H].
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x1: Tensor, mask: Tensor, clip: float | None, drops: Tensor | None, W_hh1: Tensor, *upper: Tensor | None) -> tuple[Tensor, ...]:
        B, T, H4 = x1.shape
        H, L, p = H4 // 4, 1 + len(upper) // 3, ctx.precision
        waves = T + L - 1
        layer = torch.arange(L, device=x1.device)
        step = torch.arange(waves, device=x1.device).unsqueeze(1) - layer  # [waves, L]: the step each layer runs
        inside = (step >= 0) & (step < T)
        at = step.clamp(0, T - 1)
        keep = (mask.t()[at] * inside.unsqueeze(-1)).to(p.acc).unsqueeze(-1)  # [waves, L, B, 1]
        base = p.buffer(x1, waves, L, B, 4 * H, zero=True)
        base[:T, 0] = x1.transpose(0, 1)
        for k in range(1, L):
            if upper[3 * k - 1] is not None:
                base[:, k] = upper[3 * k - 1]
        # Layer l's output in wave w feeds layer l + 1 in the next wave, dropped out as at layer l's step (the top's feeds nothing).
        fwd_mask = None
        if drops is not None:
            fwd_mask = torch.ones(waves, L, B, H, dtype=p.acc, device=x1.device)
            for k in range(L - 1):
                fwd_mask[:, k] = drops[k].transpose(0, 1)[at[:, k]]
        # xh[w, l] = [layer l's input in wave w; its state before wave w]; slot L is where the top layer's output goes.
        xh, xh_c = p.buffer(x1, waves + 1, L + 1, B, 2 * H, zero=True), _companion(p, x1, waves + 1, L + 1, B, 2 * H)
        c = p.buffer(x1, waves + 1, L, B, H, zero=True)
        gates, c_raw, tanh_c = p.buffer(x1, waves, L, B, 4 * H), p.buffer(x1, waves, L, B, H), p.buffer(x1, waves, L, B, H)
        gemm = _companion(p, x1, L, B, 4 * H)
        W = torch.stack([torch.cat([torch.zeros_like(W_hh1), W_hh1], 1)] + [torch.cat(upper[3 * k - 3 : 3 * k - 1], 1) for k in range(1, L)])
        W_t = W.transpose(1, 2).to(p.compute)  # [L, 2H, 4H]
        rows = lambda a: a.reshape(-1, a.shape[-1])  # [L, B, n] (a view) -> [L·B, n]
        for w in range(waves):
            torch.bmm(xh_c[w, :L], W_t, out=gemm)
            LSTMCell(
                base=rows(base[w]),
                gemm=rows(gemm),
                c_prev=rows(c[w]),
                h_prev=rows(xh[w, :L, :, H:]),
                keep=rows(keep[w]),
                clip=clip,
                gates=rows(gates[w]),
                c_raw=rows(c_raw[w]),
                tanh_c=rows(tanh_c[w]),
                c_next=rows(c[w + 1]),
                h_next=rows(xh[w + 1, :L, :, H:]),
                h_next_c=rows(xh_c[w + 1, :L, :, H:]),
                fwd=rows(xh[w + 1, 1:, :, :H]),
                fwd_c=rows(xh_c[w + 1, 1:, :, :H]),
                fwd_mask=rows(fwd_mask[w]) if fwd_mask is not None else None,
            ).run()
        ctx.clip, ctx.shape = clip, (B, T, H, L)
        shared.save(ctx, xh=xh, xh_c=xh_c, c=c, gates=gates, c_raw=c_raw, tanh_c=tanh_c, keep=keep, fwd_mask=fwd_mask, W=W, upper=list(upper))
        return xh[L : L + T, L - 1, :, H:].transpose(0, 1), xh[waves, :L, :, H:], c[waves]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_out: Tensor, d_h: Tensor, d_c: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        xh, xh_c, gates, keep, fwd_mask, upper = s.xh, s.xh_c, s.gates, s.keep, s.fwd_mask, s.upper
        (B, T, H, L), p, clip = ctx.shape, ctx.precision, ctx.clip
        waves = T + L - 1
        d_out = p.steps_first(d_out)
        d_gates, d_gates_c = p.buffer(xh, waves, L, B, 4 * H), _companion(p, xh, waves, L, B, 4 * H)
        d_xh = _companion(p, xh, waves + 1, L + 1, B, 2 * H)  # slot L stays 0: nothing reads the top layer's output there
        rest, dc = d_h.to(p.acc).reshape(L * B, H).clone(), d_c.to(p.acc).reshape(L * B, H).clone()
        Wc = s.W.to(p.compute)  # [L, 4H, 2H]
        rows = lambda a: a.reshape(-1, a.shape[-1])
        for w in range(waves - 1, -1, -1):
            t = w - (L - 1)  # the top layer's step in this wave
            LSTMCellBack(
                rest=rest,
                own=rows(d_xh[w + 1, :L, :, H:]),
                below=rows(d_xh[w + 1, 1:, :, :H]),
                below_mask=rows(fwd_mask[w]) if fwd_mask is not None else None,
                extra=d_out[t] if 0 <= t < T else None,
                keep=rows(keep[w]),
                dc=dc,
                gates=rows(gates[w]),
                c_prev=rows(s.c[w]),
                tanh_c=rows(s.tanh_c[w]),
                c_raw=rows(s.c_raw[w]),
                clip=clip,
                d_gates=rows(d_gates[w]),
                d_gates_c=rows(d_gates_c[w]),
            ).run()
            torch.bmm(d_gates_c[w], Wc, out=d_xh[w, :L])
        # Σ over waves and rows of d_gatesᵀ [x; h], one batched product over the layers.
        d_W = torch.bmm(d_gates_c.permute(1, 3, 0, 2).reshape(L, 4 * H, -1), xh_c[:waves, :L].permute(1, 0, 2, 3).reshape(L, -1, 2 * H)).to(p.acc)
        grads: list[Tensor | None] = [d_W[0, :, H:]]
        for k in range(1, L):
            grads += [d_W[k, :, :H], d_W[k, :, H:], d_gates[:, k].sum((0, 1)) if upper[3 * k - 1] is not None else None]
        d_x1 = d_gates[:T, 0].transpose(0, 1)
        return d_x1, None, None, None, *grads


def _forms(loop: shared.FeedLoop) -> tuple[ScoreForm, KindForm]:
    """The kernel forms of the loop's score and kind (which attention.py's Score.form and Kind.form name)."""
    return SCORE_FORMS[loop.attention.score_form], KIND_FORMS[loop.attention.kind_form]


def _at(buffers: dict[str, Tensor | None], t: int) -> dict[str, Tensor | None]:
    """Step t's rows of buffers of every step."""
    return {name: b[t] if b is not None else None for name, b in buffers.items()}


def _attention_operands(p: Precision, loop: shared.FeedLoop, w: shared.FeedTensors) -> dict[str, Tensor | None]:
    """The tensors every step's attention stage reads, forward and back, as it reads them: the keys, the annotations and
    their mask, v_a and v_p."""
    v_a, v_p = (v.reshape(-1).to(p.acc) if v is not None else None for v in (w.attention.score_vector, w.attention.kind_vector))  # [1, H] -> [H]
    keys, annotations = w.keys.to(p.acc).contiguous(), w.annotations.to(p.acc).contiguous()
    return {"keys": keys, "mask": loop.source.mask.to(p.acc), "ann": annotations, "v_a": v_a, "v_p": v_p}


def _attention_settings(loop: shared.FeedLoop) -> dict[str, Any]:
    """What else the attention stages read: the window, the source's order and the names of the score's and kind's forms."""
    att = loop.attention
    return {"window": att.window, "reversed_source": att.reversed_source, "score": att.score_form, "kind": att.kind_form}


def _query_blocks(a: shared.AttentionTensors) -> list[Tensor]:
    """The blocks of rows of the query product W_q h_t the score and the kind hand over: the score's W_a (concat: H
    rows; location: one per slot) over the kind's W_p (local-p: H rows)."""
    return [w for w in (a.score_query, a.kind_query) if w is not None]


def _attention_grads(a: shared.AttentionTensors, d_Wq: Tensor | None, d_v_a: Tensor | None, d_v_p: Tensor | None) -> shared.AttentionTensors:
    """The gradients of the attention's tensors from W_q's (its blocks' rows, views: no copy), v_a's and v_p's; 0 for the
    others, which act outside the loop (general's W_a, on the keys)."""
    rows = a.score_query.shape[0] if a.score_query is not None else 0
    return shared.AttentionTensors(
        score_query=d_Wq[:rows] if a.score_query is not None else None,
        kind_query=d_Wq[rows:] if a.kind_query is not None else None,
        score_vector=d_v_a.reshape(a.score_vector.shape) if a.score_vector is not None else None,
        kind_vector=d_v_p.reshape(a.kind_vector.shape) if a.kind_vector is not None else None,
        others=[torch.zeros_like(w) for w in a.others],
    )


@dataclass
class _FeedStack:
    """The stacked LSTM of LuongFeedKernels: each layer's [W_ih W_hh] (in the products' dtype) and summed bias (None
    for layer 1, whose bias is in its input projection, and without biases), the cell's clip, the dropout between the
    layers, and the buffers of every step and layer: xh[l, t] = [layer l's input at step t; its state before step t]
    (xh_c in the products' dtype), the cells c, the gates, c before its clip and tanh(c)."""

    W: Sequence[Tensor]
    bias: Sequence[Tensor | None]
    clip: float | None
    layer_masks: Tensor | None
    xh: Tensor
    xh_c: Tensor
    c: Tensor
    gates: Tensor
    c_raw: Tensor
    tanh_c: Tensor

    def step(self, t: int, x: Tensor, gemm: Tensor, top_c: Tensor) -> None:
        """Step t of every layer from layer 1's input projection x [B, 4H]: a product and a cell stage per layer, which
        writes the next layer's (dropped-out) input, and the top layer's state into top_c."""
        L, B, H = len(self.W), x.shape[0], x.shape[1] // 4
        for layer in range(L):
            top = layer == L - 1
            base = x if layer == 0 else self.bias[layer].expand(B, 4 * H) if self.bias[layer] is not None else None
            torch.mm(self.xh_c[layer, t], self.W[layer].t(), out=gemm)
            LSTMCell(
                base=base,
                gemm=gemm,
                c_prev=self.c[layer, t],
                h_prev=None,
                keep=None,
                clip=self.clip,
                gates=self.gates[layer, t],
                c_raw=self.c_raw[layer, t],
                tanh_c=self.tanh_c[layer, t],
                c_next=self.c[layer, t + 1],
                h_next=self.xh[layer, t + 1, :, H:],
                h_next_c=self.xh_c[layer, t + 1, :, H:],
                fwd=None if top else self.xh[layer + 1, t, :, :H],
                fwd_c=top_c if top else self.xh_c[layer + 1, t, :, :H],
                fwd_mask=self.layer_masks[layer, t] if not top and self.layer_masks is not None else None,
            ).run()

    def step_back(self, t: int, d_below: Tensor, dq_top: Tensor | None, d_xh: Tensor, dc: Tensor, d_gates: Tensor, d_gates_c: Tensor) -> None:
        """`step` t back, top layer first: the top state's gradient d_below [+ the query product's dq_top], each
        layer's d(pre-activations) into d_gates (d_gates_c) and d[x; h] into d_xh, dL/dc carried in dc."""
        L, H = len(self.W), d_below.shape[1]
        for layer in range(L - 1, -1, -1):
            top = layer == L - 1
            LSTMCellBack(
                rest=None,
                own=d_xh[layer, :, H:],
                below=d_below if top else d_xh[layer + 1, :, :H],
                below_mask=self.layer_masks[layer, t] if not top and self.layer_masks is not None else None,
                extra=dq_top if top else None,
                keep=None,
                dc=dc[layer],
                gates=self.gates[layer, t],
                c_prev=self.c[layer, t],
                tanh_c=self.tanh_c[layer, t],
                c_raw=self.c_raw[layer, t],
                clip=self.clip,
                d_gates=d_gates[layer, t],
                d_gates_c=d_gates_c[layer, t],
            ).run()
            torch.mm(d_gates_c[layer, t], self.W[layer], out=d_xh[layer])


class LuongFeedKernels(torch.autograd.Function):
    """fused.LuongFeedLoop (same inputs and outputs) for every Luong attention whose score and kind have a kernel form
    (SCORE_FORMS, KIND_FORMS: global, local-m, local-p; dot, general, concat, location): per step and layer a
    product [W_ih W_hh]·[x; h] and one
    kernel for the cell (which also writes the next layer's dropped-out input); the query product h_t·W_qᵀ where
    the score or local-p needs one (W_a h_t, W_p h_t: `_query_blocks`); one kernel for the attention
    (scores, window, softmax, Gaussian, context); one product W_c [c; h_top] and one kernel for h̃ = tanh(·) (which
    writes the next step's fed input); back the same, with the query's gradient as one product W_qᵀ·dq that the
    top layer's cell kernel adds in. nmt.matlab's attnLayerForward.m/attnLayerBackprop.m compute the same per
    step. Inputs: the FeedLoop, then FeedTensors.flat() (shared.py)."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, loop: shared.FeedLoop, *flat: Tensor | None) -> tuple[Tensor, Tensor]:
        L, clip, p = loop.layers, loop.clip, ctx.precision
        feed_mask, layer_masks = loop.feed_mask, loop.layer_masks
        score, kind = _forms(loop)
        w = loop.tensors(flat)
        blocks = _query_blocks(w.attention)
        W_q = torch.cat(blocks) if blocks else None
        operands = _attention_operands(p, loop, w)
        attention = {**operands, **_attention_settings(loop)}
        B, T, H4 = w.x1.shape
        H, S, Q = H4 // 4, w.annotations.shape[1], W_q.shape[0] if W_q is not None else 0
        xs = p.steps_first(w.x1)
        b = shared.FeedBuffers.start(p, w)
        xh, h_tilde, contexts, alphas = b.xh, b.h_tilde, b.contexts, b.alphas
        xh_c = _companion(p, w.x1, L, T + 1, B, 2 * H)  # xh in the products' dtype
        xh_c[:, 0, :, H:] = w.h0
        queries = _companion(p, w.x1, T, B, Q) if Q else None
        kept = kind.kept(p, w.x1, T, B, S, H)
        ctop_c, gemm, pre = _companion(p, w.x1, B, 2 * H), _companion(p, w.x1, B, 4 * H), _companion(p, w.x1, B, H)
        W = [torch.cat((W_ih, W_hh), 1).to(p.compute) for W_ih, W_hh in zip(w.W_ih, w.W_hh)]
        Wc = torch.cat((w.Wc_c, w.Wc_h), 1).to(p.compute)  # [H, 2H], read as W_c [c; h_top]
        Wq_t = W_q.t().to(p.compute) if Q else None
        at = lambda a, t: a[t] if a is not None else None  # noqa: E731
        stack = _FeedStack(W, w.bias, clip, layer_masks, xh, xh_c, b.c, b.gates, b.c_raw, b.tanh_c)
        for t in range(T):
            stack.step(t, xs[t], gemm, ctop_c[:, H:])
            if Q:
                torch.mm(ctop_c[:, H:], Wq_t, out=queries[t])
            LuongStep(
                **attention, top=xh[L - 1, t + 1, :, H:], q=at(queries, t), step=t, alpha=alphas[t], ctx=contexts[t], ctx_c=ctop_c[:, :H], **_at(kept, t)
            ).run()
            torch.mm(ctop_c, Wc.t(), out=pre)
            fed = t + 1 < T
            FeedTanh(
                bias=w.b_c,
                pre=pre,
                h_tilde=h_tilde[t + 1],
                fed=xh[0, t + 1, :, :H] if fed else None,
                fed_c=xh_c[0, t + 1, :, :H] if fed else None,
                fed_mask=feed_mask[t + 1] if fed and feed_mask is not None else None,
            ).run()
        ctx.loop = loop
        shared.save(ctx, buffers=b, W=W, tensors=w, xh_c=xh_c, operands=operands, Wc=Wc, W_q=W_q, queries=queries, kept=kept)
        return b.outputs()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_h_tilde: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        loop, p, s = ctx.loop, ctx.precision, shared.saved(ctx)
        L, clip, feed_mask, layer_masks = loop.layers, loop.clip, loop.feed_mask, loop.layer_masks
        score, kind = _forms(loop)
        b, w, xh, xh_c, W_q = s.buffers, s.tensors, s.buffers.xh, s.xh_c, s.W_q
        attention = {**s.operands, **_attention_settings(loop)}
        stack = _FeedStack(s.W, w.bias, clip, layer_masks, xh, xh_c, b.c, b.gates, b.c_raw, b.tanh_c)
        T, B, H = b.contexts.shape
        S, Q = b.alphas.shape[2], W_q.shape[0] if W_q is not None else 0
        back = shared.FeedBack.start(p, b, w, d_h_tilde, d_alphas)
        d_h_tilde, d_alphas, d_gates, d_pre = back.d_h_tilde, back.d_alphas, back.d_gates, back.d_pre
        d_gates_c = _companion(p, b.contexts, L, T, B, 4 * H)
        d_contexts, d_scores = p.buffer(b.contexts, T, B, H), p.buffer(b.contexts, T, B, S)
        d_pre_c, d_ctop, d_below = _companion(p, b.contexts, B, H), _companion(p, b.contexts, B, 2 * H), p.buffer(b.contexts, B, H)
        d_xh = _companion(p, b.contexts, L, B, 2 * H)  # per layer: d[x; h] of the step after the current one
        dc = p.buffer(b.contexts, L, B, H, zero=True)
        dq, dq_c, dq_top = (p.buffer(b.contexts, T, B, Q), _companion(p, b.contexts, B, Q), _companion(p, b.contexts, B, H)) if Q else (None, None, None)
        added, written = score.accumulators(p, b.contexts, B, S, H), kind.back_buffers(p, b.contexts, T, B)
        Wq = W_q.to(p.compute) if Q else None
        at = lambda a, t: a[t] if a is not None else None  # noqa: E731
        for t in range(T - 1, -1, -1):
            fed = t + 1 < T
            FeedTanhBack(
                d_h_tilde=d_h_tilde[t],
                d_fed=d_xh[0, :, :H] if fed else None,
                fed_mask=feed_mask[t + 1] if fed and feed_mask is not None else None,
                h_tilde=b.h_tilde[t + 1],
                d_pre=d_pre[t],
                d_pre_c=d_pre_c,
            ).run()
            torch.mm(d_pre_c, s.Wc, out=d_ctop)
            LuongStepBack(
                **attention,
                d_ctop=d_ctop,
                d_alpha=at(d_alphas, t),
                alpha=b.alphas[t],
                q=at(s.queries, t),
                d_ctx=d_contexts[t],
                d_scores=d_scores[t],
                d_below=d_below,
                dq=at(dq, t),
                dq_c=dq_c,
                **added,
                **_at(s.kept, t),
                **_at(written, t),
            ).run()
            if Q:
                torch.mm(dq_c, Wq, out=dq_top)
            stack.step_back(t, d_below, dq_top, d_xh, dc, d_gates, d_gates_c)
        d_keys, d_v_a = score.gradients(b, d_scores, added)
        d_Wq = weight_grad(p, dq, xh_c[L - 1, 1:, :, H:]) if Q else None
        grads = back.gradients(
            p,
            (d_gates_c, xh_c),
            h0=d_xh[:, :, H:].to(p.acc),
            c0=dc,
            keys=d_keys,
            annotations=shared.annotations_grad(b.alphas, d_contexts),
            attention=_attention_grads(w.attention, d_Wq, d_v_a, kind.gradient(s.kept, written)),
        )
        return (None, *grads.flat())


def lstm_stack(net: nn.LSTM, x: Tensor, mask: Tensor, clip: float | None, training: bool) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """fused.lstm_layers (what torch's LSTM computes over x [B, T, E] from a zero state) with all layers in one loop
    (LSTMStackKernels): the top layer's states (zero on padding) and every layer's final (h, c)."""
    layers, H = net.num_layers, net.hidden_size
    weights, bias = lstm.layer_weights(net), lstm.summed_biases(net)
    x1 = nn.functional.linear(x, weights[0][0], bias[0])
    drops = None
    if training and net.dropout > 0 and layers > 1:
        drops = torch.stack([lstm.between_layers(x1, H, net.dropout) for _ in range(layers - 1)])
    upper = [w for k in range(1, layers) for w in (*weights[k], bias[k])]
    out, h, c = LSTMStackKernels.apply(x1, mask, clip, drops, weights[0][1], *upper)
    return out * mask.unsqueeze(-1), (h, c)


def _kernel_forms(model_cfg: dict[str, Any]) -> str | None:
    """Why a Luong decoder of `model_cfg` has no kernel form (its score's or kind's), or None."""
    if model_cfg.get("decoder", "gru") != "lstm" or model_cfg["attention"] == "none" or not model_cfg.get("feed_input"):
        return None
    score, kind = LUONG_SCORES[model_cfg["score"]].form, LUONG_KINDS[model_cfg["attention"]].form
    if score not in SCORE_FORMS:
        return f"Luong's score {model_cfg['score']!r} has no kernel form (attention.LUONG_SCORES)"
    if kind not in KIND_FORMS:
        return f"Luong's attention {model_cfg['attention']!r} has no kernel form (attention.LUONG_KINDS)"
    return None


class KernelLoops(shared.FastLoops):
    """The loops with each step's pointwise work as one stage (LuongFeedKernels for every score and kind with a kernel
    form; a Luong decoder without input feeding runs its own steps)."""

    name: ClassVar[str] = "kernels"
    decoders: ClassVar[dict[str, shared.BahdanauForm]] = {"additive": partial(shared.additive_loop, AttentiveGRUKernels), "none": shared.fixed_context_loop}
    encoder_layers = staticmethod(lstm_stack)
    feed_loop = LuongFeedKernels

    def unsupported(self, model_cfg: dict[str, Any], part: str) -> str | None:
        return super().unsupported(model_cfg, part) or (_kernel_forms(model_cfg) if part == "decoder" else None)

    def gru_scans(self, grus: Sequence[Any], inputs: Sequence[Tensor], mask: Tensor | None, reverse: Sequence[bool], h0: Sequence[Tensor]) -> list[Tensor]:
        return scan_directions(list(inputs), mask, list(reverse), list(h0), [g.recurrent_weights() for g in grus])
