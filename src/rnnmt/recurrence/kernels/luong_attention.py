"""Luong's attention step and h̃ = tanh(W_c [c_t; h_t]) as stages (the input-feeding decoder loop, loops.py), forward
and back: each stage's operands, torch reference (attention.py's and decoders.py's equations) and Triton kernel, one
launch each, one program per sentence for the attention.

nmt.matlab's attnLayerForward.m and attnLayerBackprop.m compute the same per step. The kernels compile one variant per
score and kind form (attention.py's Score.form and Kind.form). Each form is one object here (`ScoreForm`, `KindForm`,
by name in SCORE_FORMS and KIND_FORMS): its pieces of the two stages' torch references, what the loop keeps and adds up
for it and what it ends with; its branch in the two attention kernels is the rest of it.
"""

from __future__ import annotations

from typing import ClassVar

import torch
from torch import Tensor

from rnnmt.models import attention, decoders
from rnnmt.recurrence.kernels.stages import Stage, launch, stage, widened, widened_sum
from rnnmt.recurrence.kernels.triton_common import (
    ATTENTION_WARPS,
    BLOCK,
    columns_block,
    context,
    context_back,
    jit,
    positions_block,
    row_grid,
    softmax,
    softmax_back,
    tanh,
    tl,
)
from rnnmt.recurrence.precision import Precision
from rnnmt.recurrence.shared import FeedBuffers


def _luong_positions(mask: Tensor, reversed_source: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The real positions, the sentence lengths n [B] and each position's original word index [B, S] (float)."""
    real = mask != 0
    n = real.sum(1).to(torch.float32)
    s = torch.arange(mask.shape[1], device=mask.device, dtype=torch.float32)
    return real, n, n.unsqueeze(1) - 1 - s if reversed_source else s.expand(mask.shape[0], -1)


class ScoreForm:
    """A Luong score's kernel form, which attention.py's Score.form names: the pieces of the stages' torch references
    that are the score's, what the loop's backward pass adds up for it at every step and what it ends with. `name` is
    its branch (SCORE) in the Triton kernels `_luong_attention` and `_luong_attention_back`. The query product's first
    columns are the score's (its FastWeights' query)."""

    name: ClassVar[str]

    def energies(self, step: LuongStep, n: Tensor) -> Tensor:
        """score(h_t, h̄_s) of the step [B, S], for sentences of lengths n [B]."""
        raise NotImplementedError

    def back(self, step: LuongStepBack, n: Tensor) -> Tensor | None:
        """From the scores' gradient (step.d_scores), the score's own gradients (its columns of dq, its accumulators);
        returns its term of h_t's gradient, None where it has none."""
        return None

    def slots(self, columns: int) -> int:
        """The kernels' P (location's slots) from the query product's columns the score reads."""
        return 0

    def accumulators(self, p: Precision, like: Tensor, B: int, S: int, H: int) -> dict[str, Tensor | None]:
        """The backward stage's operands the score adds into at every step, zeroed (None: it has none)."""
        return {"d_keys": None, "dv_rows": None}

    def gradients(self, buffers: FeedBuffers, d_scores: Tensor, added: dict[str, Tensor | None]) -> tuple[Tensor | None, Tensor | None]:
        """After the loop: the keys' gradient and v_a's from the scores' gradients [T, B, S] and the accumulators (None
        where the score reads none)."""
        return None, None


class Dot(ScoreForm):
    """dot and general: keys·h_t (general's keys W_a h̄_s, made outside the loop)."""

    name = "dot"

    def energies(self, step: LuongStep, n: Tensor) -> Tensor:
        return attention.dot_energies(widened(step.top).unsqueeze(1), step.keys).squeeze(1)

    def back(self, step: LuongStepBack, n: Tensor) -> Tensor | None:
        return torch.bmm(step.d_scores.unsqueeze(1), step.keys).squeeze(1)

    def gradients(self, buffers: FeedBuffers, d_scores: Tensor, added: dict[str, Tensor | None]) -> tuple[Tensor | None, Tensor | None]:
        return buffers.dot_keys_grad(d_scores), None


class Concat(ScoreForm):
    """v_a·tanh(h̄_s + W_a h_t), W_a h_t the query product's first H columns; the keys' and v_a's gradients add up in
    the backward stage."""

    name = "concat"

    def energies(self, step: LuongStep, n: Tensor) -> Tensor:
        H, S = step.ann.shape[2], step.ann.shape[1]
        terms = attention.additive_terms(step.keys, widened(step.q[:, :H]).unsqueeze(1))
        return attention.additive_energies(terms.reshape(-1, H), step.v_a.view(1, H)).view(-1, S)

    def back(self, step: LuongStepBack, n: Tensor) -> Tensor | None:
        H = step.ann.shape[2]
        t = attention.additive_terms(step.keys, widened(step.q[:, :H]).unsqueeze(1)).squeeze(1)
        d_pre = attention.additive_terms_grad(step.d_scores, widened(step.v_a), t)
        step.d_keys += d_pre
        torch.sum(d_pre, dim=1, out=step.dq[:, :H])
        step.dv_rows += (step.d_scores.unsqueeze(2) * t).sum(1)
        return None

    def accumulators(self, p: Precision, like: Tensor, B: int, S: int, H: int) -> dict[str, Tensor | None]:
        return {"d_keys": p.buffer(like, B, S, H, zero=True), "dv_rows": p.buffer(like, B, H, zero=True)}

    def gradients(self, buffers: FeedBuffers, d_scores: Tensor, added: dict[str, Tensor | None]) -> tuple[Tensor | None, Tensor | None]:
        return added["d_keys"], added["dv_rows"].sum(0)


class Location(ScoreForm):
    """(W_a h_t) at each position's slot P − n + s, one query column per slot; positions read before the first slot
    get none. It reads no keys."""

    name = "location"

    def slots(self, columns: int) -> int:
        return columns

    def energies(self, step: LuongStep, n: Tensor) -> Tensor:
        slots = step.q.shape[1] - KIND_FORMS[step.kind].columns(step.ann.shape[2])
        return attention.location_energies(widened(step.q[:, :slots]).unsqueeze(1), n.long(), step.ann.shape[1]).squeeze(1)

    def back(self, step: LuongStepBack, n: Tensor) -> Tensor | None:
        slots = step.dq.shape[1] - KIND_FORMS[step.kind].columns(step.ann.shape[2])
        slot = torch.arange(step.mask.shape[1], device=step.mask.device) + (slots - n.long()).unsqueeze(1)
        taken = step.d_scores * (slot >= 0)
        step.dq[:, :slots] = torch.zeros_like(step.dq[:, :slots]).scatter_add_(1, slot.clamp(0, slots - 1), taken)
        return None


class KindForm:
    """A Luong attention kind's kernel form, which attention.py's Kind.form names: the pieces of the stages' torch
    references that are the kind's, what the loop keeps for it at every step and what it ends with. `name` is its branch
    (KIND) in the Triton kernels. The query product's last columns are the kind's (its FastWeights' query)."""

    name: ClassVar[str]

    def columns(self, H: int) -> int:
        """The query product's columns the kind reads."""
        return 0

    def inv_two_var(self, window: int) -> float:
        """The kernels' 1 / 2σ² of a Gaussian over the window (σ = D/2); 0 without one."""
        return 0.0

    def centre(self, step: LuongStep, n: Tensor) -> Tensor | None:
        """The window's centre [B] at the step (None: no window), for sentences of lengths n [B]."""
        return None

    def weigh(self, step: LuongStep, weights: Tensor, original: Tensor) -> Tensor:
        """α from the softmax over the allowed positions, at the original word positions [B, S]."""
        return weights

    def through(self, step: LuongStepBack, d_weights: Tensor, original: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        """Back through `weigh`: the softmax's output and its gradient, and the window centre's gradient (None: none)."""
        return step.alpha, d_weights, None

    def back(self, step: LuongStepBack, n: Tensor, d_centre: Tensor | None) -> None:
        """From the centre's gradient, the kind's own (its columns of dq, dz)."""

    def kept(self, p: Precision, like: Tensor, T: int, B: int, S: int, H: int) -> dict[str, Tensor | None]:
        """The forward stage's outputs the kind keeps for every step, which the backward stage reads (None: none)."""
        return {"soft": None, "pos": None, "tanh_u": None}

    def back_buffers(self, p: Precision, like: Tensor, T: int, B: int) -> dict[str, Tensor | None]:
        """The backward stage's outputs the kind writes at every step (None: none)."""
        return {"dz": None}

    def gradient(self, kept: dict[str, Tensor | None], written: dict[str, Tensor | None]) -> Tensor | None:
        """After the loop: v_p's gradient (None where the kind has no vector)."""
        return None


class Global(KindForm):
    """Every position."""

    name = "global"


class LocalM(KindForm):
    """The window [p_t − D, p_t + D] centred on the target step, at most on the last word."""

    name = "local-m"

    def centre(self, step: LuongStep, n: Tensor) -> Tensor | None:
        return attention.monotonic_centre(torch.full((1,), step.step, device=n.device), n.unsqueeze(1)).squeeze(1)


class LocalP(KindForm):
    """p_t = n·σ(v_p·tanh(W_p h_t)), W_p h_t the query product's last H columns; the window centred on ⌊p_t⌋, which
    has no gradient, and the softmax times exp(−(s − p_t)² / 2σ²), not renormalised."""

    name = "local-p"

    def columns(self, H: int) -> int:
        return H

    def inv_two_var(self, window: int) -> float:
        return 1.0 / (2 * (window / 2) ** 2)

    def centre(self, step: LuongStep, n: Tensor) -> Tensor | None:
        H, Q = step.ann.shape[2], step.q.shape[1]
        step.pos.copy_(attention.predicted_position(n, widened(step.q[:, Q - H :]), step.v_p.view(1, H), terms=step.tanh_u))
        return torch.floor(step.pos)

    def weigh(self, step: LuongStep, weights: Tensor, original: Tensor) -> Tensor:
        step.soft.copy_(weights)
        return weights * attention.gaussian(original - step.pos.unsqueeze(1), step.window)

    def through(self, step: LuongStepBack, d_weights: Tensor, original: Tensor) -> tuple[Tensor, Tensor, Tensor | None]:
        offset = original.to(step.pos.dtype) - step.pos.unsqueeze(1)
        gauss = attention.gaussian(offset, step.window)
        d_pos = (d_weights * step.soft * gauss * offset).sum(1) / (step.window / 2) ** 2
        return step.soft, d_weights * gauss, d_pos

    def back(self, step: LuongStepBack, n: Tensor, d_centre: Tensor | None) -> None:
        H = step.ann.shape[2]
        sig = step.pos / n.to(step.pos.dtype)
        torch.mul(d_centre * n.to(step.pos.dtype), sig * (1.0 - sig), out=step.dz)
        torch.mul(step.dz.unsqueeze(1) * widened(step.v_p), 1.0 - step.tanh_u * step.tanh_u, out=step.dq[:, step.dq.shape[1] - H :])

    def kept(self, p: Precision, like: Tensor, T: int, B: int, S: int, H: int) -> dict[str, Tensor | None]:
        return {"soft": p.buffer(like, T, B, S), "pos": p.buffer(like, T, B), "tanh_u": p.buffer(like, T, B, H)}

    def back_buffers(self, p: Precision, like: Tensor, T: int, B: int) -> dict[str, Tensor | None]:
        return {"dz": p.buffer(like, T, B)}

    def gradient(self, kept: dict[str, Tensor | None], written: dict[str, Tensor | None]) -> Tensor | None:
        tanh_u = kept["tanh_u"]
        return written["dz"].reshape(1, -1) @ tanh_u.reshape(-1, tanh_u.shape[-1])


# The kernel forms by name (attention.py's Score.form and Kind.form): the kernels take a form's name as their SCORE or
# KIND and compile its branch alone.
SCORE_FORMS: dict[str, ScoreForm] = {form.name: form for form in (Dot(), Concat(), Location())}
KIND_FORMS: dict[str, KindForm] = {form.name: form for form in (Global(), LocalM(), LocalP())}


def _sizes(score: str, kind: str, window: int, S: int, H: int, Q: int) -> dict[str, int | float]:
    """The attention kernels' sizes: S, H, the query product's columns Q, the location score's slots P (0 for the
    other scores), 1 / 2σ² of local-p's Gaussian and the blocks of a row."""
    slots = SCORE_FORMS[score].slots(Q - KIND_FORMS[kind].columns(H))
    inv_two_var = KIND_FORMS[kind].inv_two_var(window)
    return {"S": S, "H": H, "Q": Q, "P": slots, "inv_two_var": inv_two_var, "BLOCK_S": positions_block(S), "BLOCK_H": columns_block(S)}


def _constants(stage: LuongStep | LuongStepBack) -> dict[str, object]:
    """The kernels' compile-time choices: the score's and kind's forms (attention.py's Score.form, Kind.form) and the
    source's order; one program (ATTENTION_WARPS warps) per sentence."""
    if stage.score not in SCORE_FORMS or stage.kind not in KIND_FORMS:  # a name no branch of the kernels takes
        raise ValueError(f"stage {stage.name}: score {stage.score!r} or kind {stage.kind!r} has no kernel form ({tuple(SCORE_FORMS)}, {tuple(KIND_FORMS)})")
    return {"SCORE": stage.score, "KIND": stage.kind, "REVERSED": stage.reversed_source, "num_warps": ATTENTION_WARPS}


@stage("luong_attention")
class LuongStep(Stage):
    """One step of Luong's attention (attention.LuongAttention.forward, by its equations) for top states h_t [B, H]
    at 0-based target step `step`: the scores (dot: keys·h_t; concat: v_a·tanh(h̄_s + W_a h_t); location: (W_a h_t) at
    each position's slot), the window (local-m centred on min(step, n − 1); local-p on ⌊p_t⌋, p_t = n·σ(v_p·tanh(W_p
    h_t)) into pos, tanh(W_p h_t) into tanh_u), the softmax over the allowed positions (0 where none is) into soft
    (local-p) and, times local-p's Gaussian, into alpha; c = Σ_s α_s h̄_s into ctx and ctx_c. q holds the step's query
    product h_t·W_qᵀ, W_q stacking W_a (concat: H rows; location: one per slot) over W_p (local-p: the last H rows);
    dot needs none."""

    top: Tensor
    q: Tensor | None
    keys: Tensor
    mask: Tensor
    ann: Tensor
    v_a: Tensor | None
    v_p: Tensor | None
    step: int
    window: int
    reversed_source: bool
    score: str  # a SCORE_FORMS name
    kind: str  # a KIND_FORMS name
    alpha: Tensor
    soft: Tensor | None
    ctx: Tensor
    ctx_c: Tensor
    pos: Tensor | None
    tanh_u: Tensor | None

    def reference(self) -> None:
        score, kind = SCORE_FORMS[self.score], KIND_FORMS[self.kind]
        real, n, original = _luong_positions(self.mask, self.reversed_source)
        acc = self.alpha.dtype
        original, n = original.to(acc), n.to(acc)
        allowed = real
        centre = kind.centre(self, n)
        if centre is not None:
            allowed = allowed & attention.within_window(original - centre.unsqueeze(1), self.window)
        weights = kind.weigh(self, attention.attention_weights(score.energies(self, n).to(acc), allowed), original)
        self.alpha.copy_(weights)
        attention.attention_context(self.alpha.unsqueeze(1), self.ann, out=self.ctx.unsqueeze(1))
        self.ctx_c.copy_(self.ctx)

    def launch(self) -> None:
        B, S, H = self.ann.shape
        Q = self.q.shape[1] if self.q is not None else 0
        launch(_luong_attention, self, (B,), **_sizes(self.score, self.kind, self.window, S, H, Q), **_constants(self))


@jit
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


@jit
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
    if KIND == "local-m":  # centred on the target step, at most on the last word
        allowed = allowed & (tl.abs(original - tl.minimum(step, n - 1).to(tl.float32)) <= window)
    if KIND == "local-p":  # p_t = n·σ(v_p·tanh(W_p h_t)), the last H columns of q
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
    if SCORE == "dot":  # dot, general: keys·h_t
        for h0 in range(0, H, BLOCK_H):
            h = h0 + tl.arange(0, BLOCK_H)
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
            energy += tl.sum(k * tl.load(top + b * top_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :], axis=1)
    if SCORE == "concat":  # v_a·tanh(h̄_s + W_a h_t), W_a h_t the first H columns of q
        for h0 in range(0, H, BLOCK_H):
            h = h0 + tl.arange(0, BLOCK_H)
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=(s[:, None] < S) & (h[None, :] < H), other=0.0)
            t = tanh(k + tl.load(q + b * q_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :])
            energy += tl.sum(t * tl.load(v_a + h, mask=h < H, other=0.0).to(tl.float32)[None, :], axis=1)
    if SCORE == "location":  # (W_a h_t) at each position's slot P − n + s; positions read before the first slot get none
        slot = s + (P - n)
        energy = tl.load(q + b * q_stride + slot, mask=real & (slot >= 0), other=0.0).to(tl.float32)
        allowed = allowed & (slot >= 0)
    weights = softmax(energy, allowed)
    if KIND == "local-p":  # the softmax, then times the Gaussian exp(−(j − p_t)² / 2σ²), not renormalised
        tl.store(soft + b * S + s, weights, mask=s < S)
        offset = original - p
        weights = weights * tl.exp(-(offset * offset) * inv_two_var)
    tl.store(alpha + b * S + s, weights, mask=s < S)
    context(weights, b, s, S, H, ann, ctx, ctx_c, ctx_c_stride, 0, H, BLOCK_H)


@stage("luong_attention_back")
class LuongStepBack(Stage):
    """The gradient of `luong_attention` from d[c; h_t] [B, 2H] (W_c's product back) [and dL/dα]: dc into d_ctx, the
    scores' gradient into d_scores, h_t's gradient through the scores (dot) and directly into d_below, the query
    product's gradient into dq and dq_c; concat adds the keys' gradient into d_keys and Σ_s de_s·tanh(·) into dv_rows;
    local-p writes d(v_p·tanh(W_p h_t)) into dz. The window's centre ⌊p_t⌋ has no gradient."""

    d_ctop: Tensor
    d_alpha: Tensor | None
    ann: Tensor
    alpha: Tensor
    soft: Tensor | None
    keys: Tensor
    q: Tensor | None
    mask: Tensor
    v_a: Tensor | None
    v_p: Tensor | None
    pos: Tensor | None
    tanh_u: Tensor | None
    window: int
    reversed_source: bool
    score: str
    kind: str
    d_ctx: Tensor
    d_scores: Tensor
    d_below: Tensor
    dq: Tensor | None
    dq_c: Tensor | None
    d_keys: Tensor | None
    dv_rows: Tensor | None
    dz: Tensor | None

    def reference(self) -> None:
        score, kind = SCORE_FORMS[self.score], KIND_FORMS[self.kind]
        _, n, original = _luong_positions(self.mask, self.reversed_source)
        H = self.ann.shape[2]
        self.d_ctx.copy_(self.d_ctop[:, :H])
        d_weights = torch.bmm(self.ann, self.d_ctx.unsqueeze(2)).squeeze(2)
        if self.d_alpha is not None:
            d_weights = d_weights + widened(self.d_alpha)
        weights, d_soft, d_centre = kind.through(self, d_weights, original)
        attention.weights_grad(weights, d_soft, out=self.d_scores)
        below, on_top = widened(self.d_ctop[:, H:]), score.back(self, n)
        self.d_below.copy_(below + on_top if on_top is not None else below)
        kind.back(self, n, d_centre)
        if self.dq_c is not None:
            self.dq_c.copy_(self.dq)

    def launch(self) -> None:
        B, S, H = self.ann.shape
        sizes = _sizes(self.score, self.kind, self.window, S, H, self.dq.shape[1] if self.dq is not None else 0)
        launch(_luong_attention_back, self, (B,), **sizes, **_constants(self), BLOCK_P=positions_block(max(sizes["P"], 1)))


@jit
def _location_back(de, real, s, n, b, P, Q, dq, dq_c, dq_c_stride, BLOCK_P: tl.constexpr):
    """location: each slot's gradient is its position's score gradient (slots are distinct within a row), into dq."""
    j = tl.arange(0, BLOCK_P)
    hit = ((s + (P - n))[:, None] == j[None, :]) & real[:, None]
    total = tl.sum(tl.where(hit, de[:, None], 0.0), axis=0)
    tl.store(dq + b * Q + j, total, mask=j < P)
    tl.store(dq_c + b * dq_c_stride + j, total.to(dq_c.dtype.element_ty), mask=j < P)


@jit
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


@jit
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
    BLOCK_S: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real, n, nf, original = _positions(mask, b, s, S, REVERSED)
    d_weights = context_back(b, s, S, H, d_ctop, d_ctop_stride, None, 0, ann, d_ctx, H, BLOCK_H)
    if d_alpha is not None:
        d_weights += tl.load(d_alpha + b * S + s, mask=s < S, other=0.0).to(tl.float32)
    if KIND == "local-p":  # through the Gaussian to the softmax and to p_t (⌊p_t⌋, the window's centre, has no gradient)
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
        if SCORE == "dot":
            k = tl.load(keys + b * S * H + s[:, None] * H + h[None, :], mask=inside, other=0.0)
            below += tl.sum(de[:, None] * k, axis=0)
        tl.store(d_below + b * H + h, below, mask=h < H)
        if SCORE == "concat":
            at = b * S * H + s[:, None] * H + h[None, :]
            t = tanh(tl.load(keys + at, mask=inside, other=0.0) + tl.load(q + b * q_stride + h, mask=h < H, other=0.0).to(tl.float32)[None, :])
            d_pre = de[:, None] * tl.load(v_a + h, mask=h < H, other=0.0).to(tl.float32)[None, :] * (1.0 - t * t)
            tl.store(d_keys + at, tl.load(d_keys + at, mask=inside, other=0.0) + d_pre, mask=inside)
            total = tl.sum(d_pre, axis=0)
            tl.store(dq + b * Q + h, total, mask=h < H)
            tl.store(dq_c + b * dq_c_stride + h, total.to(dq_c.dtype.element_ty), mask=h < H)
            tl.store(dv_rows + b * H + h, tl.load(dv_rows + b * H + h, mask=h < H, other=0.0) + tl.sum(de[:, None] * t, axis=0), mask=h < H)
    if SCORE == "location":
        _location_back(de, real, s, n, b, P, Q, dq, dq_c, dq_c_stride, BLOCK_P)
    if KIND == "local-p":
        _predicted_position_back(d_pos, p, nf, b, H, Q, v_p, tanh_u, dz, dq, dq_c, dq_c_stride, BLOCK_H)


@stage("feed_tanh")
class FeedTanh(Stage):
    """h̃ = tanh(pre [+ bias]) (decoders.attentional_state); h̃[∘fed_mask], the next step's fed input, into fed and fed_c
    where given."""

    bias: Tensor | None
    pre: Tensor
    h_tilde: Tensor
    fed: Tensor | None
    fed_c: Tensor | None
    fed_mask: Tensor | None

    def reference(self) -> None:
        decoders.attentional_state(widened_sum(self.pre, self.bias), out=self.h_tilde)
        if self.fed is not None:
            out = self.h_tilde * self.fed_mask if self.fed_mask is not None else self.h_tilde
            self.fed.copy_(out)
            self.fed_c.copy_(out)

    def launch(self) -> None:
        launch(_feed_tanh, self, row_grid(*self.h_tilde.shape), H=self.h_tilde.shape[1], BLOCK=BLOCK)


@jit
def _feed_tanh(bias, pre, h_tilde, fed, fed_stride, fed_c, fed_c_stride, fed_mask, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    x = tl.load(pre + row * H + j, mask=m).to(tl.float32)
    if bias is not None:
        x += tl.load(bias + j, mask=m).to(tl.float32)
    y = tanh(x)
    tl.store(h_tilde + row * H + j, y, mask=m)
    if fed is not None:
        if fed_mask is not None:
            y = y * tl.load(fed_mask + row * H + j, mask=m).to(tl.float32)
        tl.store(fed + row * fed_stride + j, y, mask=m)
        tl.store(fed_c + row * fed_c_stride + j, y.to(fed_c.dtype.element_ty), mask=m)


@stage("feed_tanh_back")
class FeedTanhBack(Stage):
    """d(pre) = (dL/dh̃ [+ d_fed∘fed_mask, from the next step's input]) ∘ (1 − h̃²) (decoders.attentional_state_grad),
    also into d_pre_c."""

    d_h_tilde: Tensor
    d_fed: Tensor | None
    fed_mask: Tensor | None
    h_tilde: Tensor
    d_pre: Tensor
    d_pre_c: Tensor

    def reference(self) -> None:
        d = widened(self.d_h_tilde)
        if self.d_fed is not None:
            d = d + (widened(self.d_fed) * self.fed_mask if self.fed_mask is not None else widened(self.d_fed))
        decoders.attentional_state_grad(d, self.h_tilde, out=self.d_pre)
        self.d_pre_c.copy_(self.d_pre)

    def launch(self) -> None:
        launch(_feed_tanh_back, self, row_grid(*self.h_tilde.shape), H=self.h_tilde.shape[1], BLOCK=BLOCK)


@jit
def _feed_tanh_back(d_h_tilde, d_fed, d_fed_stride, fed_mask, h_tilde, d_pre, d_pre_c, H, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    j = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    m = j < H
    d = tl.load(d_h_tilde + row * H + j, mask=m).to(tl.float32)
    if d_fed is not None:
        back = tl.load(d_fed + row * d_fed_stride + j, mask=m).to(tl.float32)
        if fed_mask is not None:
            back = back * tl.load(fed_mask + row * H + j, mask=m).to(tl.float32)
        d = d + back
    y = tl.load(h_tilde + row * H + j, mask=m)
    out = d * (1.0 - y * y)
    tl.store(d_pre + row * H + j, out, mask=m)
    tl.store(d_pre_c + row * H + j, out.to(d_pre_c.dtype.element_ty), mask=m)
