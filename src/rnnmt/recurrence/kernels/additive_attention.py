"""Bahdanau's additive attention step and its gradient as stages (RNNsearch's decoder loop, loops.py): each stage's
operands, torch reference (attention.py's equations and gradients) and Triton kernels, two launches each.

GroundHog's RecurrentLayerWithSearch.step_fprop (experiments/nmt/encdec.py). An attention step is two kernels so that
a sentence's work spreads over many programs: one program per sentence, as one kernel needs for the softmax between
the energies and the context, left most of a GPU's memory bandwidth idle (33 µs a step at paper size on an H100).
Energies are computed a few positions per program, the context a block of columns per program, each recomputing the
softmax of ≤ 64 energies; backward alike (scores by positions, then keys by columns).
"""

from __future__ import annotations

import torch
from torch import Tensor

from rnnmt.models import attention
from rnnmt.recurrence.kernels.stages import Stage, launch, stage, widened, widened_sum
from rnnmt.recurrence.kernels.triton_common import cdiv, context, context_back, jit, positions_block, softmax, softmax_back, tanh, tl

# Source positions per program of the energies and of their backward, and the columns of their sums' tiles;
# columns per program of the context and keys (over all positions).
ROW_POSITIONS = 4
ROW_SPAN = 1024
ROW_COLUMNS = 128


@stage("additive_attention", launches=2)
class AdditiveStep(Stage):
    """tanh(keys + q) into terms [B, S, A] (attention.additive_terms); α = softmax of its products with v over the mask
    (additive_energies, attention_weights); c = Σ_s α_s ann_s (attention_context)."""

    keys: Tensor
    q: Tensor  # W_a s
    v: Tensor  # v_a [A]
    mask: Tensor  # 1 on real positions
    ann: Tensor
    terms: Tensor
    alpha: Tensor
    ctx: Tensor
    ctx_c: Tensor

    def reference(self) -> None:
        B, S, A = self.terms.shape
        attention.additive_terms(self.keys, widened(self.q).unsqueeze(1), out=self.terms.unsqueeze(1))
        energy = attention.additive_energies(self.terms.view(B * S, A), self.v.view(1, A)).view(B, S)
        attention.attention_weights(energy, self.mask != 0, out=self.alpha)
        attention.attention_context(self.alpha.unsqueeze(1), self.ann, out=self.ctx.unsqueeze(1))
        self.ctx_c.copy_(self.ctx)

    def launch(self) -> None:
        (B, S, A), C = self.keys.shape, self.ann.shape[2]
        energy = self.alpha.new_empty(B, S)
        launch(_additive_energies, self, (B, cdiv(S, ROW_POSITIONS)), energy=energy, S=S, A=A, BLOCK_S=ROW_POSITIONS, BLOCK_A=ROW_SPAN)
        launch(_additive_context, self, (B, cdiv(C, ROW_COLUMNS)), energy=energy, S=S, C=C, BLOCK_S=positions_block(S), BLOCK_C=ROW_COLUMNS)


@jit
def _additive_energies(keys, q, q_stride, v, terms, energy, S, A, BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr):
    """Positions s of row b: tanh(keys + q) into terms, e_s = v·tanh into energy."""
    b = tl.program_id(0)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    e = tl.zeros([BLOCK_S], dtype=tl.float32)
    for a0 in range(0, A, BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        inside = (s[:, None] < S) & (a[None, :] < A)
        at = b * S * A + s[:, None] * A + a[None, :]
        pre = tl.load(keys + at, mask=inside, other=0.0) + tl.load(q + b * q_stride + a, mask=a < A, other=0.0).to(tl.float32)[None, :]
        t = tanh(pre)
        tl.store(terms + at, t, mask=inside)
        e += tl.sum(t * tl.load(v + a, mask=a < A, other=0.0)[None, :], axis=1)
    tl.store(energy + b * S + s, e, mask=s < S)


@jit
def _additive_context(energy, mask, ann, alpha, ctx, ctx_c, S, C, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    """Columns of row b's context from α = softmax(e) over the real positions (every column block computes α; the first stores it)."""
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    real = (s < S) & (tl.load(mask + b * S + s, mask=s < S, other=0) != 0)
    weights = softmax(tl.load(energy + b * S + s, mask=s < S, other=0.0), real)
    tl.store(alpha + b * S + s, weights, mask=s < tl.where(tl.program_id(1) == 0, S, 0))
    c_first = tl.program_id(1) * BLOCK_C
    context(weights, b, s, S, C, ann, ctx, ctx_c, C, c_first, c_first + BLOCK_C, BLOCK_C)


@stage("additive_attention_back", launches=2)
class AdditiveStepBack(Stage):
    """dc = d_ctx [+ dcx]; de = the softmax's backward of dc·ann [+ d_alpha] (attention.weights_grad); d_keys += the
    terms' gradient (attention.additive_terms_grad); dq = its sum over S."""

    d_ctx: Tensor
    dcx: Tensor | None
    d_alpha: Tensor | None
    ann: Tensor
    alpha: Tensor
    v: Tensor
    terms: Tensor
    dc: Tensor
    de: Tensor
    d_keys: Tensor
    dq: Tensor
    dq_c: Tensor

    def reference(self) -> None:
        self.dc.copy_(widened_sum(self.d_ctx, self.dcx))
        d_weights = torch.bmm(self.ann, self.dc.unsqueeze(2)).squeeze(2)
        if self.d_alpha is not None:
            d_weights = d_weights + widened(self.d_alpha)
        attention.weights_grad(self.alpha, d_weights, out=self.de)
        d_pre = attention.additive_terms_grad(self.de, self.v, self.terms)
        self.d_keys += d_pre
        torch.sum(d_pre, dim=1, out=self.dq)
        self.dq_c.copy_(self.dq)

    def launch(self) -> None:
        (B, S, A), C = self.terms.shape, self.ann.shape[2]
        d_weights = self.alpha.new_empty(B, S)
        launch(_additive_scores_back, self, (B, cdiv(S, ROW_POSITIONS)), d_weights=d_weights, S=S, C=C, BLOCK_S=ROW_POSITIONS, BLOCK_C=ROW_SPAN)
        launch(_additive_keys_back, self, (B, cdiv(A, ROW_COLUMNS)), d_weights=d_weights, S=S, A=A, BLOCK_S=positions_block(S), BLOCK_A=ROW_COLUMNS)


@jit
def _additive_scores_back(d_ctx, dcx, dcx_stride, d_alpha, ann, dc, d_weights, S, C, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    """Positions s of row b: dL/dα_s = dc·ann[b, s] [+ d_alpha] into d_weights; dc = d_ctx [+ dcx] (stored by the first block)."""
    b = tl.program_id(0)
    s = tl.program_id(1) * BLOCK_S + tl.arange(0, BLOCK_S)
    found = context_back(b, s, S, C, d_ctx, C, dcx, dcx_stride, ann, dc, tl.where(tl.program_id(1) == 0, C, 0), BLOCK_C)
    if d_alpha is not None:
        found += tl.load(d_alpha + b * S + s, mask=s < S, other=0.0).to(tl.float32)
    tl.store(d_weights + b * S + s, found, mask=s < S)


@jit
def _additive_keys_back(d_weights, alpha, v, terms, de, d_keys, dq, dq_c, dq_c_stride, S, A, BLOCK_S: tl.constexpr, BLOCK_A: tl.constexpr):
    """Columns a of row b: de = softmax backward (stored by the first block); d_keys += de∘v∘(1 − tanh²), dq = its sum over s."""
    b = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    d_scores = softmax_back(tl.load(alpha + b * S + s, mask=s < S, other=0.0), tl.load(d_weights + b * S + s, mask=s < S, other=0.0))
    tl.store(de + b * S + s, d_scores, mask=s < tl.where(tl.program_id(1) == 0, S, 0))
    a = tl.program_id(1) * BLOCK_A + tl.arange(0, BLOCK_A)
    inside = (s[:, None] < S) & (a[None, :] < A)
    at = b * S * A + s[:, None] * A + a[None, :]
    t = tl.load(terms + at, mask=inside, other=0.0)
    d_pre = d_scores[:, None] * tl.load(v + a, mask=a < A, other=0.0)[None, :] * (1.0 - t * t)
    tl.store(d_keys + at, tl.load(d_keys + at, mask=inside, other=0.0) + d_pre, mask=inside)
    total = tl.sum(d_pre, axis=0)
    tl.store(dq + b * A + a, total, mask=a < A)
    tl.store(dq_c + b * dq_c_stride + a, total.to(dq_c.dtype.element_ty), mask=a < A)
