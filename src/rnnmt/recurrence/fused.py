"""The recurrent loops with a hand-written backward pass (`train.recurrence: fused`, the CPU's default):
GroundHog's GRU over a sequence, Bahdanau's attention decoder, Luong's input-feeding decoder and one LSTM
layer over a sequence, and `FusedLoops`, which runs a model's loops with them.

Autograd through a Python loop records a dozen small operations per time step and, in the backward pass,
computes every weight gradient as one small matrix product per step. These functions run the modules'
equations (models/gru.py, lstm.py, attention.py and decoders.py: GroundHog's `RecurrentLayer.step_fprop` in
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rnnmt.models import attention, decoders, gru, lstm
from rnnmt.models.attention import LUONG_KINDS, LUONG_SCORES, LuongAttention
from rnnmt.models.encoders import Encoded
from rnnmt.models.loops import Loops
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


def _gru_weight_grads(p: Precision, dx: Tensor, h_prev: Tensor, rh: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """dU_zr, dU and db over all steps at once: dx [T, B, 3H], h_prev and r∘h [T, B, H]."""
    H = h_prev.shape[-1]
    return weight_grad(p, dx[..., : 2 * H], h_prev), weight_grad(p, dx[..., 2 * H :], rh), dx[..., 2 * H :].sum((0, 1))


class GRUScan(torch.autograd.Function):
    """States [B, T, H] of a GRU over projected inputs x [B, T, 3H] from h0 [B, H], left to right or (reverse)
    right to left; masked steps (mask [B, T] False) carry the state over."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, x: Tensor, h0: Tensor, mask: Tensor | None, reverse: bool, U_gates: Tensor, U_cand: Tensor, b_cand: Tensor) -> Tensor:
        B, T, H3 = x.shape
        H, p = H3 // 3, ctx.precision
        xs = p.steps_first(x)  # [T, B, 3H], with the candidate's bias added once
        xs[..., 2 * H :] += b_cand
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
        ctx.save_for_backward(states, gates, rh, cand, keep, U_gates, U_cand)
        return (states[:-1] if reverse else states[1:]).transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        states, gates, rh, cand, keep, U_gates, U_cand = ctx.saved_tensors
        T, B, H = cand.shape
        reverse, p = ctx.reverse, ctx.precision
        grad = grad.transpose(0, 1)
        previous = states[1:] if reverse else states[:-1]  # the state each position starts from
        dx = p.buffer(grad, T, B, 3 * H)
        dh = p.buffer(grad, B, H, zero=True)
        Ug, Uc = p.weight(U_gates), p.weight(U_cand)
        for t in range(T) if reverse else range(T - 1, -1, -1):
            dh = _gru_backward(p, dh + grad[t], previous[t], Ug, Uc, gates[t], cand[t], keep[t] if keep is not None else None, dx[t])
        dU_gates, dU_cand, db = _gru_weight_grads(p, dx, previous, rh)
        return dx.transpose(0, 1), dh, None, None, dU_gates, dU_cand, db


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
        B, T, H3 = x.shape
        H, S, A, p = H3 // 3, keys.shape[1], keys.shape[2], ctx.precision
        xs = p.steps_first(x)
        xs[..., 2 * H :] += b_cand
        keys, annotations = keys.to(p.acc), annotations.to(p.acc)
        states = p.buffer(x, T, B, H)
        states[0] = s0
        contexts = p.buffer(x, T, B, annotations.shape[2])
        tanh = p.buffer(x, T, B, S, A)
        alphas = p.buffer(x, T, B, S)
        gates, rh, cand = p.buffer(x, T, B, 2 * H), p.buffer(x, T, B, H), p.buffer(x, T, B, H)
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
        ctx.save_for_backward(states, contexts, alphas, tanh, gates, rh, cand, annotations, W_a, v_a, C_in, U_gates, U_cand)
        return states.transpose(0, 1), contexts.transpose(0, 1), alphas.transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_states: Tensor, d_contexts: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        states, contexts, alphas, tanh, gates, rh, cand, annotations, W_a, v_a, C_in, U_gates, U_cand = ctx.saved_tensors
        T, B, H = states.shape
        S, A, p = tanh.shape[2], tanh.shape[3], ctx.precision
        d_states, d_contexts = d_states.transpose(0, 1), d_contexts.transpose(0, 1)
        d_alphas = d_alphas.transpose(0, 1) if d_alphas is not None else None
        dx = p.buffer(states, T, B, 3 * H, zero=True)  # the last step has no GRU update: its row stays 0
        dc_all = p.buffer(states, T, B, contexts.shape[2])
        dq_all = p.buffer(states, T, B, A)
        de_all = p.buffer(states, T, B, S)
        dkeys = p.buffer(states, B, S, A, zero=True)
        v = v_a.reshape(A).to(p.acc)
        Wa, C, Ug, Uc = (p.weight(w) for w in (W_a, C_in, U_gates, U_cand))
        ds = p.buffer(states, B, H, zero=True)  # dL/ds_t from the steps after t
        for t in range(T - 1, -1, -1):
            dc = d_contexts[t]
            if t + 1 < T:
                ds = _gru_backward(p, ds, states[t], Ug, Uc, gates[t], cand[t], None, dx[t])
                dc = p.addmm(dc.to(p.acc), dx[t], C)
            dc_all[t] = dc
            alpha = alphas[t]
            dalpha = torch.bmm(dc.unsqueeze(1), annotations.transpose(1, 2)).squeeze(1)
            if d_alphas is not None:
                dalpha = dalpha + d_alphas[t]
            attention.weights_grad(alpha, dalpha, out=de_all[t])
            dpre = attention.additive_terms_grad(de_all[t], v, tanh[t])
            dkeys += dpre
            torch.sum(dpre, dim=1, out=dq_all[t])
            ds = p.addmm(ds + d_states[t], dq_all[t], Wa)
        dW_a = weight_grad(p, dq_all, states)
        dv = (de_all.reshape(1, -1) @ tanh.reshape(-1, A)).reshape(v_a.shape)
        dC_in = weight_grad(p, dx, contexts)
        d_annotations = torch.bmm(alphas.permute(1, 2, 0), dc_all.transpose(0, 1))
        # The GRU ran T − 1 steps, from states[0..T−2].
        dU_gates, dU_cand, db = _gru_weight_grads(p, dx[:-1], states[:-1], rh[:-1])
        return ds, dx.transpose(0, 1), dkeys, d_annotations, None, dW_a, dv, dC_in, dU_gates, dU_cand, db


@dataclass
class FeedLoop:
    """What Luong's input-feeding loop needs besides the tensors it differentiates (`FeedTensors`)."""

    layers: int
    clip: float | None  # of the carried cell, or None
    feed_mask: Tensor | None  # inverted-dropout multipliers on the fed h̃ [T, B, H], or None
    layer_masks: Tensor | None  # between the layers [L − 1, T, B, H], or None
    attention: LuongAttention  # its forward, where the loop has no written-out form of it
    source: Encoded  # its mask and summary
    steps: Tensor  # the 0-based target steps [T]
    dot: bool  # the written-out form: global attention with a dot-product score (energies = keys·h_t)

    def attend(self, h: Tensor, keys: Tensor, annotations: Tensor, t: int) -> tuple[Tensor, Tensor]:
        """The attention's forward for top states h [B, H] at step t: (c [B, H], α [B, S])."""
        c, alpha = self.attention(h.unsqueeze(1), keys, Encoded(annotations, self.source.mask, self.source.summary), self.steps[t : t + 1])
        return c.squeeze(1), alpha.squeeze(1)


@dataclass
class FeedTensors:
    """The tensors of the input-feeding loop by name; `flat` and `of` lay them out as autograd.Function.apply takes
    them (and the gradients as backward returns them)."""

    x1: Tensor  # [B, T, 4H]: layer 1's input projection of the embeddings, its biases added
    h0: Tensor  # [L, B, H]
    c0: Tensor
    W_ih: list[Tensor]  # per layer; layer 1's: the columns that read the fed h̃
    W_hh: list[Tensor]
    bias: list[Tensor | None]  # per layer b_ih + b_hh; None for layer 1 (in x1) and without biases
    Wc_c: Tensor  # W_c's context and state halves, and its bias
    Wc_h: Tensor
    b_c: Tensor | None
    keys: Tensor
    annotations: Tensor
    attention: list[Tensor]  # the attention's own parameters, in its order

    def flat(self) -> list[Tensor | None]:
        per_layer = [t for k in range(len(self.W_ih)) for t in (self.W_ih[k], self.W_hh[k], self.bias[k])]
        return [self.x1, self.h0, self.c0, *per_layer, self.Wc_c, self.Wc_h, self.b_c, self.keys, self.annotations, *self.attention]

    @staticmethod
    def of(flat: Sequence[Tensor | None], layers: int) -> FeedTensors:
        """The inverse of `flat`."""
        x1, h0, c0, *rest = flat
        per_layer, (Wc_c, Wc_h, b_c, keys, annotations), own = rest[: 3 * layers], rest[3 * layers : 3 * layers + 5], rest[3 * layers + 5 :]
        return FeedTensors(x1, h0, c0, list(per_layer[0::3]), list(per_layer[1::3]), list(per_layer[2::3]), Wc_c, Wc_h, b_c, keys, annotations, list(own))


def _dropout(decoder: nn.Module, shape: tuple[int, ...], p: float, like: Tensor) -> Tensor | None:
    """Inverted-dropout multipliers (0 or 1/(1 − p)) while the decoder trains with p > 0, else None."""
    if not decoder.training or p == 0:
        return None
    return lstm.dropout_multipliers(shape, p, like)


def feed_loop(decoder: Any, ctx: dict[str, Any], words: Tensor, steps: Tensor, state: tuple[Tensor, Tensor]) -> tuple[FeedLoop, FeedTensors]:
    """A LuongDecoder's input-feeding loop over its input words [B, T] (decoders.py): the loop's settings and tensors."""
    enc, net, emb = ctx["enc"], decoder.lstm, decoder.embed.weight.shape[1]
    layers, att = net.num_layers, decoder.attention
    weights, bias = lstm.layer_weights(net), lstm.summed_biases(net)
    # Dropout on [E y; h̃] is dropout on each part: the embeddings' here, h̃'s in the loop.
    x1 = nn.functional.linear(decoder.drop(decoder.embed(words)), weights[0][0][:, :emb], bias[0])
    shape = (words.shape[1], words.shape[0], decoder.hidden)
    feed_mask = _dropout(decoder, shape, decoder.drop.p, x1)
    layer_masks = _dropout(decoder, (layers - 1, *shape), net.dropout, x1) if layers > 1 else None
    dot = LUONG_SCORES[att.score].form == "dot" and LUONG_KINDS[att.kind].form == "global"
    loop = FeedLoop(layers, decoder.state_clip, feed_mask, layer_masks, att, enc, steps, dot)
    W_c = decoder.W_c
    tensors = FeedTensors(
        x1,
        *state,
        W_ih=[W_ih[:, emb:] if k == 0 else W_ih for k, (W_ih, _) in enumerate(weights)],
        W_hh=[W_hh for _, W_hh in weights],
        bias=[None, *bias[1:]],
        Wc_c=W_c.weight[:, : decoder.hidden],
        Wc_h=W_c.weight[:, decoder.hidden :],
        b_c=W_c.bias,
        keys=ctx["keys"],
        annotations=enc.annotations,
        attention=list(att.parameters()),
    )
    return loop, tensors


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
    (`FeedLoop.attend`), whose backward is autograd's, recomputed per step in the backward pass; its parameters
    are among the inputs (`FeedTensors.attention`) only so that autograd hands their gradients on. Global
    attention with a dot-product score (`FeedLoop.dot`: dot, general with keys W_a h̄_s prepared outside) is
    written out instead: α = softmax(keys·h_t) over the source mask, c_t = Σ_s α_s h̄_s (attention.py's
    equations; nmt.matlab's `attnLayerForward.m`), its backward too, with the keys' and annotations'
    gradients of all steps as one product each.

    Inputs: the FeedLoop, then FeedTensors.flat(). Returns h̃ [B, T, H] and α [B, T, S].
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, loop: FeedLoop, *flat: Tensor | None) -> tuple[Tensor, Tensor]:
        L, clip, p = loop.layers, loop.clip, ctx.precision
        feed_mask, layer_masks, mask = loop.feed_mask, loop.layer_masks, loop.source.mask
        w = FeedTensors.of(flat, L)
        x1, bias, b_c = w.x1, w.bias, w.b_c
        keys, annotations = w.keys.to(p.acc), w.annotations.to(p.acc)
        B, T, H4 = x1.shape
        H = H4 // 4
        xs = p.steps_first(x1)
        # xh[l, t] = [what layer l reads besides its own state (layer 1: the fed h̃, masked); its state before step t]
        xh = p.buffer(x1, L, T + 1, B, 2 * H)
        inputs, h = xh[:, :T, :, :H], xh[..., H:]
        c = p.buffer(x1, L, T + 1, B, H)  # the carried (clipped) cell
        h[:, 0], c[:, 0] = w.h0, w.c0
        gates = p.buffer(x1, L, T, B, 4 * H)
        c_raw, tanh_c = p.buffer(x1, L, T, B, H), p.buffer(x1, L, T, B, H)
        h_tilde = p.buffer(x1, T + 1, B, H, zero=True)  # h_tilde[t + 1] = h̃_t; h̃_0 = 0
        contexts = p.buffer(x1, T, B, H)
        alphas = p.buffer(x1, T, B, annotations.shape[1])
        # Each layer's [W_ih W_hh] [4H, 2H], cast once: read transposed here, as it is in backward.
        W = [p.weight(torch.cat((a, b), 1)) for a, b in zip(w.W_ih, w.W_hh)]
        Wcc_t, Wch_t = p.weight(w.Wc_c.t()), p.weight(w.Wc_h.t())
        for t in range(T):
            for layer in range(L):
                source, drop = (h_tilde[t], feed_mask) if layer == 0 else (h[layer - 1, t + 1], layer_masks)
                if drop is not None:
                    torch.mul(source, drop[t] if layer == 0 else drop[layer - 1, t], out=inputs[layer, t])
                else:
                    inputs[layer, t] = source
                base = xs[t] if layer == 0 else bias[layer].expand(B, 4 * H) if bias[layer] is not None else None
                pre = p.addmm(base, xh[layer, t], W[layer].t(), out=gates[layer, t])
                lstm.cell(pre, c[layer, t], c_raw[layer, t], tanh_c[layer, t], h[layer, t + 1])
                c[layer, t + 1] = lstm.clip_cell(c_raw[layer, t], clip)
            top = h[L - 1, t + 1]
            if loop.dot:
                energy = attention.dot_energies(top.unsqueeze(1), keys).squeeze(1)
                attention.attention_weights(energy, mask, out=alphas[t])
                attention.attention_context(alphas[t].unsqueeze(1), annotations, out=contexts[t].unsqueeze(1))
            else:
                contexts[t], alphas[t] = loop.attend(top, keys, annotations, t)
            pre = p.addmm(b_c.expand(B, H) if b_c is not None else None, contexts[t], Wcc_t)
            decoders.attentional_state(p.addmm(pre, top, Wch_t), out=h_tilde[t + 1])
        ctx.loop = loop
        ctx.save_for_backward(xh, c, gates, c_raw, tanh_c, h_tilde, contexts, alphas, *W, *flat)
        return h_tilde[1:].transpose(0, 1), alphas.transpose(0, 1)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_h_tilde: Tensor, d_alphas: Tensor | None) -> tuple[Tensor | None, ...]:
        loop, p = ctx.loop, ctx.precision
        L, clip, feed_mask, layer_masks = loop.layers, loop.clip, loop.feed_mask, loop.layer_masks
        xh, c, gates, c_raw, tanh_c, h_tilde, contexts, alphas, *saved = ctx.saved_tensors
        W, w = saved[:L], FeedTensors.of(saved[L:], L)
        params, bias, b_c = w.attention, w.bias, w.b_c
        keys, annotations = w.keys.to(p.acc), w.annotations.to(p.acc)
        T, B, H = contexts.shape
        h = xh[..., H:]
        d_h_tilde = d_h_tilde.transpose(0, 1)
        d_alphas = d_alphas.transpose(0, 1) if d_alphas is not None else None
        d_gates = p.buffer(contexts, L, T, B, 4 * H)
        d_pre_c = p.buffer(contexts, T, B, H)  # d(W_c [c; h] + b)
        d_keys, d_annotations = torch.zeros_like(keys), torch.zeros_like(annotations)
        d_params = [torch.zeros_like(w) for w in params]
        dh = [p.buffer(contexts, B, H, zero=True) for _ in range(L)]  # dL/dh[l, t + 1] from step t + 1
        dc = [p.buffer(contexts, B, H, zero=True) for _ in range(L)]  # dL/dc[l, t + 1] (carried) from step t + 1
        d_fed = p.buffer(contexts, B, H, zero=True)  # dL/dh̃_t from step t + 1's input
        Wcc, Wch = p.weight(w.Wc_c), p.weight(w.Wc_h)
        if loop.dot:
            d_scores, d_contexts = p.buffer(contexts, *alphas.shape), p.buffer(contexts, T, B, H)
        for t in range(T - 1, -1, -1):
            decoders.attentional_state_grad(d_h_tilde[t] + d_fed, h_tilde[t + 1], out=d_pre_c[t])
            top = h[L - 1, t + 1]
            d_context = p.mm(d_pre_c[t], Wcc)
            if loop.dot:
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
                    found = torch.autograd.grad(outputs, leaves + list(params), grads, allow_unused=True)
                d_top = found[0]
                d_keys += found[1] if found[1] is not None else 0
                d_annotations += found[2] if found[2] is not None else 0
                for acc, g in zip(d_params, found[3:]):
                    if g is not None:
                        acc += g
            d_below = p.addmm(d_top, d_pre_c[t], Wch)
            for layer in range(L - 1, -1, -1):
                d_out = dh[layer] + d_below
                dc_new = lstm.clipped_cell_grad(dc[layer], c_raw[layer, t], clip)
                dc[layer] = lstm.cell_backward(d_out, dc_new, gates[layer, t], c[layer, t], tanh_c[layer, t], d_gates[layer, t])
                d_xh = p.mm(d_gates[layer, t], W[layer])
                d_in, dh[layer] = d_xh[:, :H], d_xh[:, H:]
                if layer == 0:
                    d_fed = d_in * feed_mask[t] if feed_mask is not None else d_in
                else:
                    d_below = d_in * layer_masks[layer - 1, t] if layer_masks is not None else d_in
        if loop.dot:
            # Σ_t of the per-step outer products, one batched product each.
            d_keys = torch.bmm(d_scores.permute(1, 2, 0), h[L - 1, 1:].transpose(0, 1))
            d_annotations = torch.bmm(alphas.permute(1, 2, 0), d_contexts.transpose(0, 1))
        grads: list[Tensor | None] = []
        for layer in range(L):
            d_bias = d_gates[layer].sum((0, 1)) if bias[layer] is not None else None
            d_W = weight_grad(p, d_gates[layer], xh[layer, :T])
            grads += [d_W[:, :H], d_W[:, H:], d_bias]
        d_b_c = d_pre_c.sum((0, 1)) if b_c is not None else None
        grads += [weight_grad(p, d_pre_c, contexts), weight_grad(p, d_pre_c, h[L - 1, 1:]), d_b_c]
        grads += [d_keys, d_annotations, *d_params]
        return (None, d_gates[0].transpose(0, 1), torch.stack(dh), torch.stack(dc), *grads)


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
        ctx.save_for_backward(h, c, gates, c_raw, tanh_c, keep, W_hh)
        return h[1:].transpose(0, 1), h[T], c[T]

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, d_out: Tensor, d_h: Tensor, d_c: Tensor) -> tuple[Tensor | None, ...]:
        h, c, gates, c_raw, tanh_c, keep, W_hh = ctx.saved_tensors
        T, B, H = c_raw.shape
        p, clip = ctx.precision, ctx.clip
        d_out = d_out.transpose(0, 1)
        d_gates = p.buffer(h, T, B, 4 * H)
        Whh = p.weight(W_hh)
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


def fixed_context_loop(decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
    """RNNencdec's decoder loop (attention `none`: the context is the summary c at every step) as one GRU scan over
    W·y_t + C·c from s_0, by the GRU's own loops: the states before each word, the contexts and the weights."""
    gru, steps = decoder.gru, x_proj.shape[1]
    after = gru.scan(x_proj[:, :-1] + gru.project_context(keys).unsqueeze(1), None, h0=s0)
    queries = torch.cat([s0.unsqueeze(1), after], dim=1)
    alphas = enc.mask.to(keys.dtype).unsqueeze(1).expand(-1, steps, -1)
    return queries, keys.unsqueeze(1).expand(-1, steps, -1), alphas


def additive_loop(function: Any, decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Encoded) -> tuple[Tensor, Tensor, Tensor]:
    """RNNsearch's decoder loop (additive attention) as `function` (AttentiveGRULoop or its kernel form) runs it."""
    gru = decoder.gru
    return function.apply(s0, x_proj, keys, enc.annotations, enc.mask, *decoder.attention.loop_weights(), gru.context_weight(), *gru.recurrent_weights())


BahdanauForm = Callable[[Any, Tensor, Tensor, Tensor, Encoded], tuple[Tensor, Tensor, Tensor]]


def bahdanau_unsupported(forms: dict[str, BahdanauForm], model_cfg: dict[str, Any], recurrence: str) -> str | None:
    """Why a GRU decoder of `model_cfg` has no form among `forms` (by its attention's name), or None."""
    if model_cfg.get("decoder", "gru") == "gru" and model_cfg["attention"] not in forms:
        return f"Bahdanau attention {model_cfg['attention']!r} has no {recurrence} form (recurrence/)"
    return None


@dataclass(frozen=True)
class FusedLoops(Loops):
    """The loops with the hand-written backward passes above."""

    name: ClassVar[str] = "fused"
    decoders: ClassVar[dict[str, BahdanauForm]] = {
        "additive": lambda decoder, *args: additive_loop(AttentiveGRULoop, decoder, *args),
        "none": fixed_context_loop,
    }
    encoder_layers: ClassVar[Callable[..., tuple[Tensor, tuple[Tensor, Tensor]]]] = staticmethod(lstm_layers)
    feed_loop: ClassVar[type[torch.autograd.Function]] = LuongFeedLoop

    def unsupported(self, model_cfg: dict[str, Any], part: str) -> str | None:
        return bahdanau_unsupported(self.decoders, model_cfg, self.name) if part == "decoder" else None

    def gru_scans(self, grus: Sequence[Any], inputs: Sequence[Tensor], mask: Tensor | None, reverse: Sequence[bool], h0: Sequence[Tensor]) -> list[Tensor]:
        return [GRUScan.apply(x, h, mask, r, *g.recurrent_weights()) for g, x, r, h in zip(grus, inputs, reverse, h0)]

    def bahdanau_decoder(self, decoder: Any, s0: Tensor, x_proj: Tensor, keys: Tensor, enc: Any) -> tuple[Tensor, Tensor, Tensor]:
        return self.decoders[decoder.attention_name](decoder, s0, x_proj, keys, enc)

    def lstm_encoder(self, encoder: Any, x: Tensor, mask: Tensor) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        # On a GPU, cuDNN's kernel over packed sequences is the fast form (faithful without clipping).
        if x.device.type == "cuda" and encoder.state_clip is None and self.packed:
            return encoder.steps(x, mask, self.packed)
        return self.encoder_layers(encoder.lstm, x, mask, encoder.state_clip, encoder.training)

    def luong_decoder(self, decoder: Any, ctx: dict[str, Any], words: Tensor, steps: Tensor, state: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        if not decoder.feed_input or decoder.attention is None:
            return decoder.steps(ctx, words, steps, state)
        loop, tensors = feed_loop(decoder, ctx, words, steps, state)
        return self.feed_loop.apply(loop, *tensors.flat())
