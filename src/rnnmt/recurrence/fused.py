"""The recurrent loops with a hand-written backward pass (`train.recurrence: fused`, the CPU's default):
GroundHog's GRU and nmtpy's layer-normalised one over a sequence, Bahdanau's attention decoder, Luong's
input-feeding decoder and one LSTM layer over a sequence, and `FusedLoops`, which runs a model's loops with them.
What they share with the kernel loops around their steps (what they keep, the buffers, the weight gradients after
the loop) is shared.py.

Autograd through a Python loop records a dozen small operations per time step and, in the backward pass,
computes every weight gradient as one small matrix product per step. These functions run the modules'
equations (models/gru.py, lngru.py, lstm.py, attention.py and decoders.py: GroundHog's `RecurrentLayer.step_fprop` in
groundhog/layers/rec_layers.py and `RecurrentLayerWithSearch.step_fprop` in experiments/nmt/encdec.py,
paper-spec §1.2–1.4; nmt.matlab for Luong's, below) on preallocated buffers, keep what the backward pass
needs, and compute the weight gradients of all steps as one matrix product each after the loop. Their
forward passes call those equations; their backward passes are the second form, which train/selfcheck.py
compares with autograd through the modules before a run relies on it.

Products of each sentence's states with one vector per sentence (attention scores and their gradients) are
written row · matrixᵀ, [B, 1, H]·[B, H, S]: torch's batched matrix · column kernel takes twice as long on a CPU.

Notation (per step, rows = batch): gates g = σ(x_zr + U_zr h), z = g[:H], r = g[H:]; candidate
h̃ = tanh(x_h + b + U (r ∘ h)); h' = h + m ∘ z ∘ (h̃ − h), m = 1 on real positions (0 carries h over).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rnnmt.models import attention, decoders, gru, lngru, lstm
from rnnmt.recurrence import shared
from rnnmt.recurrence.precision import Precision, explicit_precision, weight_grad


def _gru_forward(
    p: Precision, x: Tensor, h: Tensor, Ug_t: Tensor, Uc_t: Tensor, gates: Tensor, rh: Tensor, cand: Tensor, keep: Tensor | None, out: Tensor
) -> None:
    """One GRU step (gru.py's equations) into preallocated rows: x = [x_zr, x_h + b] [B, 3H], U·ᵀ as `p.weight`s;
    writes gates, r∘h, h̃ and h'."""
    H = h.shape[1]
    gru.gates(p.addmm(x[:, : 2 * H], h, Ug_t, out=gates))
    torch.mul(gates[:, H:], h, out=rh)
    gru.candidate(p.addmm(x[:, 2 * H :], rh, Uc_t, out=cand))
    gru.interpolate(h, gates[:, :H], cand, keep, out=out)


def _gru_backward(p: Precision, dh: Tensor, h: Tensor, U_gates: Tensor, U_cand: Tensor, gates: Tensor, cand: Tensor, keep: Tensor | None, dx: Tensor) -> Tensor:
    """The gradient of one step: writes d(pre-activations) [B, 3H] into dx, returns dL/dh (previous state)."""
    H = h.shape[1]
    z, r = gates[:, :H], gates[:, H:]
    dstep = dh * keep if keep is not None else dh
    gru.candidate_grad(dstep, z, cand, out=dx[:, 2 * H :])
    drh = p.mm(dx[:, 2 * H :], U_cand)
    gru.gates_grad(dstep, drh, h, z, r, cand, out=dx[:, : 2 * H])
    return gru.previous_state_grad(p.addmm(dh, dx[:, : 2 * H], U_gates), drh, r, dstep, z)


class GRUScan(torch.autograd.Function):
    """States [B, T, H] of a GRU over projected inputs x [B, T, 3H] from h0 [B, H], left to right or (reverse)
    right to left; masked steps (mask [B, T] False) carry the state over."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, mask: Tensor | None, reverse: bool, U_gates: Tensor, U_cand: Tensor, b_cand: Tensor) -> Tensor:
        B, T, H3 = x.shape
        H, p = H3 // 3, ctx.precision
        xs = shared.gru_inputs(p, x, b_cand)
        keep = mask.t().unsqueeze(-1).to(p.acc) if mask is not None else None
        # Slot t + 1 (left to right) or t (right to left) holds the state after position t; h0 is the other end.
        states = p.buffer(x, T + 1, B, H)
        states[T if reverse else 0] = h0
        gates, rh, cand = p.buffer(x, T, B, 2 * H), p.buffer(x, T, B, H), p.buffer(x, T, B, H)
        Ug_t, Uc_t = p.weight(U_gates.t()), p.weight(U_cand.t())
        for t in range(T - 1, -1, -1) if reverse else range(T):
            prev, new = (t + 1, t) if reverse else (t, t + 1)
            _gru_forward(p, xs[t], states[prev], Ug_t, Uc_t, gates[t], rh[t], cand[t], keep[t] if keep is not None else None, states[new])
        ctx.reverse = reverse
        shared.save(ctx, states=states, gates=gates, rh=rh, cand=cand, keep=keep, U_gates=U_gates, U_cand=U_cand)
        return (states[:-1] if reverse else states[1:]).transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        T, B, H = s.cand.shape
        reverse, p = ctx.reverse, ctx.precision
        grad = grad.transpose(0, 1)
        previous = s.states[1:] if reverse else s.states[:-1]  # the state each position starts from
        dx = p.buffer(grad, T, B, 3 * H)
        dh = p.buffer(grad, B, H, zero=True)
        Ug, Uc = p.weight(s.U_gates), p.weight(s.U_cand)
        for t in range(T) if reverse else range(T - 1, -1, -1):
            dh = _gru_backward(p, dh + grad[t], previous[t], Ug, Uc, s.gates[t], s.cand[t], s.keep[t] if s.keep is not None else None, dx[t])
        dU_gates, dU_cand = shared.gru_weight_grads(p, dx, previous, s.rh)
        return dx.transpose(0, 1), dh, None, None, dU_gates, dU_cand, dx[..., 2 * H :].sum((0, 1))


def _layer_norm_backward(d: Tensor, sums: Tensor, mean: Tensor, rstd: Tensor, gain: Tensor) -> Tensor:
    """The gradient of the sums [N, F] through LN(sums) (its statistics as the forward pass computed them), given d =
    dL/dLN(sums); the gain's and bias's gradients are left to one sum over all steps after the loop."""
    return torch.ops.aten.native_layer_norm_backward(d, sums, sums.shape[-1:], mean, rstd, gain, None, [True, False, False])[0]


def _normalised_sums(sums: Tensor, mean: Tensor, rstd: Tensor) -> Tensor:
    """(sums − mean) / σ over every step at once: what LN's gain multiplies."""
    return (sums - mean) * rstd


class LayerNormGRUScan(torch.autograd.Function):
    """States [B, T, H] of nmtpy's layer-normalised GRU (models/lngru.py) over its normalised projected inputs
    x [B, T, 3H] from h0 [B, H], left to right or (reverse) right to left, as GRUScan's. The recurrent sums
    [U_ru h; U h] are one product a step; the gradients of U_ru, U and of LN₃'s and LN₄'s gains and biases are one
    product or sum each after the loop."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, mask: Tensor | None, reverse: bool, *weights: Tensor) -> Tensor:
        U_gates, U_cand, gain_gates, bias_gates, gain_cand, bias_cand = weights  # LayerNormGRU.recurrent_weights
        B, T, H3 = x.shape
        H, p = H3 // 3, ctx.precision
        xs = p.steps_first(x)
        keep = mask.t().unsqueeze(-1).to(p.acc) if mask is not None else None
        states = p.buffer(x, T + 1, B, H)
        states[T if reverse else 0] = h0
        sums = p.buffer(x, T, B, 3 * H)  # [U_ru h; U h], what LN₃ and LN₄ normalise
        # LN₃'s and LN₄'s statistics, per row; each [B, 1] block contiguous, as the native backward reads them.
        mean, rstd = p.buffer(x, T, 2, B, 1), p.buffer(x, T, 2, B, 1)
        ru, rec_cand, cand = p.buffer(x, T, B, 2 * H), p.buffer(x, T, B, H), p.buffer(x, T, B, H)
        U_t = p.weight(torch.cat([U_gates, U_cand]).t())
        norm_gates, norm_cand = (gain_gates.to(p.acc), bias_gates.to(p.acc)), (gain_cand.to(p.acc), bias_cand.to(p.acc))
        for t in range(T - 1, -1, -1) if reverse else range(T):
            prev, new = (t + 1, t) if reverse else (t, t + 1)
            p.addmm(None, states[prev], U_t, out=sums[t])
            rec_gates, mean[t, 0], rstd[t, 0] = torch.native_layer_norm(sums[t, :, : 2 * H], (2 * H,), *norm_gates, lngru.EPS)
            rec, mean[t, 1], rstd[t, 1] = torch.native_layer_norm(sums[t, :, 2 * H :], (H,), *norm_cand, lngru.EPS)
            ru[t] = lngru.gates(rec_gates, xs[t, :, : 2 * H])
            rec_cand[t] = rec
            cand[t] = lngru.candidate(rec, ru[t, :, :H], xs[t, :, 2 * H :])
            gru.interpolate(states[prev], ru[t, :, H:], cand[t], keep[t] if keep is not None else None, out=states[new])
        ctx.reverse = reverse
        shared.save(ctx, states=states, sums=sums, mean=mean, rstd=rstd, ru=ru, rec_cand=rec_cand, cand=cand, keep=keep, weights=list(weights))
        return (states[:-1] if reverse else states[1:]).transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        T, B, H = s.cand.shape
        reverse, p = ctx.reverse, ctx.precision
        gain_gates, gain_cand = s.weights[2].to(p.acc), s.weights[4].to(p.acc)
        grad = grad.transpose(0, 1)
        previous = s.states[1:] if reverse else s.states[:-1]
        dx = p.buffer(grad, T, B, 3 * H)  # the normalised inputs' gradients: [r; u]'s and h̃'s pre-activations
        d_sums = p.buffer(grad, T, B, 3 * H)
        d_rec_cand = p.buffer(grad, T, B, H)  # LN₄(U h)'s
        dh = p.buffer(grad, B, H, zero=True)
        U = p.weight(torch.cat([s.weights[0], s.weights[1]]))
        for t in range(T) if reverse else range(T - 1, -1, -1):
            dh = dh + grad[t]
            h, r, u, cand = previous[t], s.ru[t, :, :H], s.ru[t, :, H:], s.cand[t]
            d_step = dh * s.keep[t] if s.keep is not None else dh
            gru.candidate_grad(d_step, u, cand, out=dx[t, :, 2 * H :])
            torch.mul(dx[t, :, 2 * H :], r, out=d_rec_cand[t])
            torch.ops.aten.sigmoid_backward.grad_input(dx[t, :, 2 * H :] * s.rec_cand[t], r, grad_input=dx[t, :, :H])
            torch.ops.aten.sigmoid_backward.grad_input(d_step * (cand - h), u, grad_input=dx[t, :, H : 2 * H])
            d_sums[t, :, : 2 * H] = _layer_norm_backward(dx[t, :, : 2 * H], s.sums[t, :, : 2 * H], s.mean[t, 0], s.rstd[t, 0], gain_gates)
            d_sums[t, :, 2 * H :] = _layer_norm_backward(d_rec_cand[t], s.sums[t, :, 2 * H :], s.mean[t, 1], s.rstd[t, 1], gain_cand)
            dh = p.addmm(dh - d_step * u, d_sums[t], U)
        dU = weight_grad(p, d_sums, previous)
        d_gates = dx[..., : 2 * H]
        normed_gates = _normalised_sums(s.sums[..., : 2 * H], s.mean[:, 0], s.rstd[:, 0])
        normed_cand = _normalised_sums(s.sums[..., 2 * H :], s.mean[:, 1], s.rstd[:, 1])
        return (
            dx.transpose(0, 1),
            dh,
            None,
            None,
            dU[: 2 * H],
            dU[2 * H :],
            (d_gates * normed_gates).sum((0, 1)),
            d_gates.sum((0, 1)),
            (d_rec_cand * normed_cand).sum((0, 1)),
            d_rec_cand.sum((0, 1)),
        )


class AttentiveGRULoop(torch.autograd.Function):
    """Bahdanau's teacher-forced decoder recurrence with additive attention (decoders.py, §1.3–1.4).

    For t = 1..T: c_t, α_t = attention(s_{t−1}); s_t = GRU(x_t + C c_t, s_{t−1}). Returns the queries
    s_{t−1} [B, T, H], the contexts c_t [B, T, C] and the weights α_t [B, T, S]; the state after the last
    word is not needed (nothing reads it), so the last GRU step is not run.
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, s0: Tensor, x: Tensor, keys: Tensor, annotations: Tensor, mask: Tensor, *weights: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        W_a, v_a, C_in, U_gates, U_cand, b_cand = weights  # AdditiveAttention.loop_weights, then the GRU's C, U_zr, U, b
        B, T, S, A, p = *x.shape[:2], *keys.shape[1:], ctx.precision
        xs = shared.gru_inputs(p, x, b_cand)
        keys, annotations = keys.to(p.acc), annotations.to(p.acc)
        b = shared.AttentiveBuffers.start(p, x, s0, keys, annotations)
        states, contexts, tanh, alphas, gates, rh, cand = b.states, b.contexts, b.tanh, b.alphas, b.gates, b.rh, b.cand
        v = v_a.to(p.acc)
        Wa_t, C_t, Ug_t, Uc_t = (p.weight(w.t()) for w in (W_a, C_in, U_gates, U_cand))
        for t in range(T):
            attention.additive_terms(keys, p.mm(states[t], Wa_t).unsqueeze(1), out=tanh[t].unsqueeze(1))
            energy = attention.additive_energies(tanh[t].view(B * S, A), v).view(B, S)
            attention.attention_weights(energy, mask, out=alphas[t])
            attention.attention_context(alphas[t].unsqueeze(1), annotations, out=contexts[t].unsqueeze(1))
            if t + 1 < T:
                p.addmm(xs[t], contexts[t], C_t, out=xs[t])
                _gru_forward(p, xs[t], states[t], Ug_t, Uc_t, gates[t], rh[t], cand[t], None, states[t + 1])
        shared.save(ctx, buffers=b, annotations=annotations, W_a=W_a, v_a=v_a, C_in=C_in, U_gates=U_gates, U_cand=U_cand)
        return b.outputs()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_states: Tensor, d_contexts: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        s, p = shared.saved(ctx), ctx.precision
        b = s.buffers
        T, B, H = b.states.shape
        S, A = b.tanh.shape[2:]
        d_states, d_contexts = d_states.transpose(0, 1), d_contexts.transpose(0, 1)
        d_alphas = d_alphas.transpose(0, 1) if d_alphas is not None else None
        dx = p.buffer(d_states, T, B, 3 * H, zero=True)  # the last step has no GRU update: its row stays 0
        dc_all = p.buffer(d_states, T, B, b.contexts.shape[2])
        dq_all = p.buffer(d_states, T, B, A)
        de_all = p.buffer(d_states, T, B, S)
        dkeys = p.buffer(d_states, B, S, A, zero=True)
        v = s.v_a.reshape(A).to(p.acc)
        Wa, C, Ug, Uc = (p.weight(w) for w in (s.W_a, s.C_in, s.U_gates, s.U_cand))
        ds = p.buffer(d_states, B, H, zero=True)  # dL/ds_t from the steps after t
        for t in range(T - 1, -1, -1):
            dc = d_contexts[t]
            if t + 1 < T:
                ds = _gru_backward(p, ds, b.states[t], Ug, Uc, b.gates[t], b.cand[t], None, dx[t])
                dc = p.addmm(dc.to(p.acc), dx[t], C)
            dc_all[t] = dc
            dalpha = torch.bmm(dc.unsqueeze(1), s.annotations.transpose(1, 2)).squeeze(1)
            if d_alphas is not None:
                dalpha = dalpha + d_alphas[t]
            attention.weights_grad(b.alphas[t], dalpha, out=de_all[t])
            dpre = attention.additive_terms_grad(de_all[t], v, b.tanh[t])
            dkeys += dpre
            torch.sum(dpre, dim=1, out=dq_all[t])
            ds = p.addmm(ds + d_states[t], dq_all[t], Wa)
        return ds, dx.transpose(0, 1), dkeys, shared.annotations_grad(b.alphas, dc_all), None, *b.weight_grads(p, s.v_a, dq_all, de_all, dx)


class LuongFeedLoop(torch.autograd.Function):
    """Luong's teacher-forced decoder with input feeding (decoders.py, §4.1–4.3): for t = 1..T the stacked
    LSTM consumes [E y_{t−1}; h̃_{t−1}], the top state h_t queries the attention, h̃_t = tanh(W_c [c_t; h_t]).

    nmt.matlab's code/layers/lstmUnitForward.m (gates stacked i, f, o, a there; torch's i, f, g, o here)
    and attnLayerForward.m compute the same: c_t = f∘c + i∘g, h_t = o∘tanh(c_t); with `clip` the carried
    cell is clipped to ±clip after computing h_t.
    The embedding part of layer 1's input, E y W_e (+ biases), is projected for all steps outside the loop
    (`x1`). Each layer's other input sits beside its state, so that its gates are one product
    [W_ih W_hh]·[x; h] per step, and their gradient with respect to [x; h] one product back, as in
    lstmUnitForward.m (`input = [x_t; h_t_1]; ifoa_linear = W*input`) and lstmUnitBackprop.m
    (`d_input = W'*d_ifoa`). Dropout masks (scaled by 1/(1 − p), or None) apply to the fed-back h̃ and
    between the layers.
    The attention (any entry of attention.py's LUONG_SCORES and LUONG_KINDS) is its module's forward
    (`shared.FeedLoop.attend`), whose backward is autograd's, recomputed per step in the backward pass; its parameters
    are among the inputs (`FeedTensors.attention`) only so that autograd hands their gradients on. Global
    attention with a dot-product score (`_written_out`: dot, general with keys W_a h̄_s prepared outside) is
    written out instead: α = softmax(keys·h_t) over the source mask, c_t = Σ_s α_s h̄_s (attention.py's
    equations; nmt.matlab's `attnLayerForward.m`), its backward too, with the keys' and annotations'
    gradients of all steps as one product each.

    Inputs: the FeedLoop, then FeedTensors.flat() (shared.py). Returns h̃ [B, T, H] and α [B, T, S].
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, loop: shared.FeedLoop, *flat: Tensor | None) -> tuple[Tensor, Tensor]:
        L, clip, p = loop.layers, loop.clip, ctx.precision
        feed_mask, layer_masks, mask = loop.feed_mask, loop.layer_masks, loop.source.mask
        w = loop.tensors(flat)
        bias, b_c = w.bias, w.b_c
        keys, annotations = w.keys.to(p.acc), w.annotations.to(p.acc)
        B, T, H4 = w.x1.shape
        H = H4 // 4
        xs = p.steps_first(w.x1)
        b = shared.FeedBuffers.start(p, w)
        xh, c, h_tilde, contexts, alphas = b.xh, b.c, b.h_tilde, b.contexts, b.alphas
        inputs, h = xh[:, :T, :, :H], xh[..., H:]
        # Each layer's [W_ih W_hh] [4H, 2H], cast once: read transposed here, as it is in backward.
        W = [p.weight(torch.cat((W_ih, W_hh), 1)) for W_ih, W_hh in zip(w.W_ih, w.W_hh)]
        Wcc_t, Wch_t = p.weight(w.Wc_c.t()), p.weight(w.Wc_h.t())
        written_out = _written_out(loop)
        for t in range(T):
            for layer in range(L):
                source, drop = (h_tilde[t], feed_mask) if layer == 0 else (h[layer - 1, t + 1], layer_masks)
                if drop is not None:
                    torch.mul(source, drop[t] if layer == 0 else drop[layer - 1, t], out=inputs[layer, t])
                else:
                    inputs[layer, t] = source
                base = xs[t] if layer == 0 else bias[layer].expand(B, 4 * H) if bias[layer] is not None else None
                pre = p.addmm(base, xh[layer, t], W[layer].t(), out=b.gates[layer, t])
                lstm.cell(pre, c[layer, t], b.c_raw[layer, t], b.tanh_c[layer, t], h[layer, t + 1])
                c[layer, t + 1] = lstm.clip_cell(b.c_raw[layer, t], clip)
            top = h[L - 1, t + 1]
            if written_out:
                energy = attention.dot_energies(top.unsqueeze(1), keys).squeeze(1)
                attention.attention_weights(energy, mask, out=alphas[t])
                attention.attention_context(alphas[t].unsqueeze(1), annotations, out=contexts[t].unsqueeze(1))
            else:
                contexts[t], alphas[t] = loop.attend(top, keys, annotations, t)
            pre = p.addmm(b_c.expand(B, H) if b_c is not None else None, contexts[t], Wcc_t)
            decoders.attentional_state(p.addmm(pre, top, Wch_t), out=h_tilde[t + 1])
        ctx.loop = loop
        shared.save(ctx, buffers=b, W=W, tensors=w)
        return b.outputs()

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_h_tilde: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        s, loop, p = shared.saved(ctx), ctx.loop, ctx.precision
        b, W, w, L = s.buffers, s.W, s.tensors, loop.layers
        xh, c, h_tilde, contexts, alphas = b.xh, b.c, b.h_tilde, b.contexts, b.alphas
        keys, annotations = w.keys.to(p.acc), w.annotations.to(p.acc)
        T, B, H = contexts.shape
        h = xh[..., H:]
        back = shared.FeedBack.start(p, b, w, d_h_tilde, d_alphas)
        d_h_tilde, d_alphas, d_gates, d_pre = back.d_h_tilde, back.d_alphas, back.d_gates, back.d_pre
        d_keys, d_annotations = torch.zeros_like(keys), torch.zeros_like(annotations)
        d_attention = w.attention.filled(torch.zeros_like(t) if t is not None else None for t in w.attention.flat())
        dh = [p.buffer(contexts, B, H, zero=True) for _ in range(L)]  # dL/dh[l, t + 1] from step t + 1
        dc = [p.buffer(contexts, B, H, zero=True) for _ in range(L)]  # dL/dc[l, t + 1] (carried) from step t + 1
        d_fed = p.buffer(contexts, B, H, zero=True)  # dL/dh̃_t from step t + 1's input
        Wcc, Wch = p.weight(w.Wc_c), p.weight(w.Wc_h)
        written_out = _written_out(loop)
        if written_out:
            d_scores, d_contexts = p.buffer(contexts, *alphas.shape), p.buffer(contexts, T, B, H)
        for t in range(T - 1, -1, -1):
            decoders.attentional_state_grad(d_h_tilde[t] + d_fed, h_tilde[t + 1], out=d_pre[t])
            top = h[L - 1, t + 1]
            d_context = p.mm(d_pre[t], Wcc)
            if written_out:
                d_contexts[t] = d_context
                d_alpha = torch.bmm(d_context.unsqueeze(1), annotations.transpose(1, 2)).squeeze(1)
                if d_alphas is not None:
                    d_alpha += d_alphas[t]
                attention.weights_grad(alphas[t], d_alpha, out=d_scores[t])
                d_top = torch.bmm(d_scores[t].unsqueeze(1), keys).squeeze(1)
            else:
                with torch.enable_grad():
                    leaves = [top.detach().requires_grad_(), keys.detach().requires_grad_(), annotations.detach().requires_grad_()]
                    context, alpha = loop.attend(*leaves, t)
                    outputs, grads = [context], [d_context]
                    if d_alphas is not None:
                        outputs.append(alpha)
                        grads.append(d_alphas[t])
                    found = torch.autograd.grad(outputs, leaves + w.attention.present(), grads, allow_unused=True)
                d_top = found[0]
                d_keys += found[1] if found[1] is not None else 0
                d_annotations += found[2] if found[2] is not None else 0
                for acc, g in zip(d_attention.present(), found[3:]):
                    if g is not None:
                        acc += g
            d_below = p.addmm(d_top, d_pre[t], Wch)
            for layer in range(L - 1, -1, -1):
                d_out = dh[layer] + d_below
                dc_new = lstm.clipped_cell_grad(dc[layer], b.c_raw[layer, t], loop.clip)
                dc[layer] = lstm.cell_backward(d_out, dc_new, b.gates[layer, t], c[layer, t], b.tanh_c[layer, t], d_gates[layer, t])
                d_xh = p.mm(d_gates[layer, t], W[layer])
                d_in, dh[layer] = d_xh[:, :H], d_xh[:, H:]
                if layer == 0:
                    d_fed = d_in * loop.feed_mask[t] if loop.feed_mask is not None else d_in
                else:
                    d_below = d_in * loop.layer_masks[layer - 1, t] if loop.layer_masks is not None else d_in
        if written_out:
            # Σ_t of the per-step outer products, one batched product each.
            d_keys, d_annotations = b.dot_keys_grad(d_scores), shared.annotations_grad(alphas, d_contexts)
        grads = back.gradients(p, h0=torch.stack(dh), c0=torch.stack(dc), keys=d_keys, annotations=d_annotations, attention=d_attention)
        return (None, *grads.flat())


class LSTMScan(torch.autograd.Function):
    """One LSTM layer over projected inputs x [B, T, 4H] (W_ih x + b at every position) from (h0, c0) [B, H]:
    the outputs [B, T, H] and the final (h, c). Masked positions (mask [B, T] False) carry both over, so
    the final state is each row's after its last real position; with `clip` the carried cell is clipped.
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, c0: Tensor, mask: Tensor, W_hh: Tensor, clip: float | None) -> tuple[Tensor, Tensor, Tensor]:
        B, T, H4 = x.shape
        H, p = H4 // 4, ctx.precision
        gates = p.steps_first(x)  # the pre-activations, then (in place) the gates
        keep = mask.t().unsqueeze(-1).to(p.acc)
        h, c = p.buffer(x, T + 1, B, H), p.buffer(x, T + 1, B, H)
        h[0], c[0] = h0, c0
        c_raw, tanh_c, h_new = p.buffer(x, T, B, H), p.buffer(x, T, B, H), p.buffer(x, T, B, H)
        Whh_t = p.weight(W_hh.t())
        for t in range(T):
            lstm.cell(p.addmm(gates[t], h[t], Whh_t, out=gates[t]), c[t], c_raw[t], tanh_c[t], h_new[t])
            torch.lerp(h[t], h_new[t], keep[t], out=h[t + 1])
            torch.lerp(c[t], lstm.clip_cell(c_raw[t], clip), keep[t], out=c[t + 1])
        ctx.clip = clip
        shared.save(ctx, h=h, c=c, gates=gates, c_raw=c_raw, tanh_c=tanh_c, keep=keep, W_hh=W_hh)
        return h[1:].transpose(0, 1), h[T], c[T]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_out: Tensor, d_h: Tensor, d_c: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        h, c, gates, c_raw, tanh_c, keep = s.h, s.c, s.gates, s.c_raw, s.tanh_c, s.keep
        T, B, H = c_raw.shape
        p, clip = ctx.precision, ctx.clip
        d_out = d_out.transpose(0, 1)
        d_gates = p.buffer(h, T, B, 4 * H)
        Whh = p.weight(s.W_hh)
        dh, dc = d_h.to(p.acc), d_c.to(p.acc)
        for t in range(T - 1, -1, -1):
            dh = dh + d_out[t]
            dh_new, dc_new = dh * keep[t], dc * keep[t]  # into this step's update; the rest carries over
            dh, dc = dh - dh_new, dc - dc_new
            dc = dc + lstm.cell_backward(dh_new, lstm.clipped_cell_grad(dc_new, c_raw[t], clip), gates[t], c[t], tanh_c[t], d_gates[t])
            dh = p.addmm(dh, d_gates[t], Whh)
        return d_gates.transpose(0, 1), dh, dc, None, weight_grad(p, d_gates, h[:-1]), None


def lstm_layers(net: nn.LSTM, x: Tensor, mask: Tensor, clip: float | None, training: bool) -> tuple[Tensor, tuple[Tensor, Tensor]]:
    """What torch's LSTM computes over x [B, T, E] from a zero state (lstm.run), layer by layer with LSTMScan: each
    layer's input projection for all positions at once, then its recurrence; dropout between the layers. The top
    layer's states (zero on padding) and every layer's final (h, c)."""
    batch, H = x.shape[0], net.hidden_size
    zeros = x.new_zeros(batch, H, dtype=torch.promote_types(x.dtype, torch.float32))
    finals_h, finals_c = [], []
    for k, ((W_ih, W_hh), bias) in enumerate(zip(lstm.layer_weights(net), lstm.summed_biases(net))):
        if k > 0 and training and net.dropout > 0:
            x = x * lstm.between_layers(x, H, net.dropout)
        x, h, c = LSTMScan.apply(nn.functional.linear(x, W_ih, bias), zeros, zeros, mask, W_hh, clip)
        finals_h.append(h)
        finals_c.append(c)
    return x * mask.unsqueeze(-1), (torch.stack(finals_h), torch.stack(finals_c))


def _written_out(loop: shared.FeedLoop) -> bool:
    """Whether the loop writes its attention out: global attention with a dot-product score (energies = keys·h_t)."""
    return loop.attention.score_form == "dot" and loop.attention.kind_form == "global"


# Each GRU cell's scan, by its module (`encoder_norms` below names the encoder cells among them).
SCANS: dict[type[nn.Module], type[torch.autograd.Function]] = {gru.GroundhogGRU: GRUScan, lngru.LayerNormGRU: LayerNormGRUScan}


class FusedLoops(shared.FastLoops):
    """The loops with the hand-written backward passes above."""

    name: ClassVar[str] = "fused"
    decoders: ClassVar[dict[str, shared.BahdanauForm]] = {"additive": partial(shared.additive_loop, AttentiveGRULoop), "none": shared.fixed_context_loop}
    encoder_layers = staticmethod(lstm_layers)
    feed_loop = LuongFeedLoop
    encoder_norms: ClassVar[tuple[str, ...]] = ("none", "layer")

    def gru_scans(self, grus: Sequence[Any], inputs: Sequence[Tensor], mask: Tensor | None, reverse: Sequence[bool], h0: Sequence[Tensor]) -> list[Tensor]:
        return [SCANS[type(g)].apply(x, h, mask, r, *g.recurrent_weights()) for g, x, r, h in zip(grus, inputs, reverse, h0)]
