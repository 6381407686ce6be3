"""The pointwise stages of the GRU and additive-attention loops as single kernels (`train.recurrence: kernels`).

A teacher-forced update at paper size runs each of these stages once per step and layer, forward and
backward; as separate torch operations each is 4-15 kernel launches, which bound an update on a GPU
(docs/performance.md). Here each stage is one function that runs as one Triton kernel on a CUDA device
(triton_kernels.py) and as the same arithmetic in torch operations elsewhere: that is the reference the
tests compare the Triton kernels with (TRITON_INTERPRET=1 runs them on a CPU), and what
`rnnmt bench train` counts as one kernel on a CPU (its profiler region is named `rnnmt::kernel::*`).

The equations are GroundHog's GRU and attention (recurrence.py's notation): gates g = σ(x_zr [+ C_zr c] +
U_zr h), r∘h, h̃ = tanh(x_h + b [+ C c] + U(r∘h)), h' = h + m∘z∘(h̃ − h); e_s = v·tanh(keys_s + W_a s),
α = softmax over the real positions, c = Σ_s α_s h_s. Products come in their own dtype (bfloat16 under
autocast); every stage computes in float32 and also writes, where a product reads the result next, a copy
in the products' dtype, so no separate cast runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

# The profiler's name prefix for a stage run by its torch reference (bench.kernels counts each as one kernel).
REGION = "rnnmt::kernel::"


def _stage(reference: Callable[..., None]) -> Callable[..., None]:
    """Run a stage as its Triton kernel on a CUDA device, else as `reference` inside a profiler region."""
    name = reference.__name__

    @functools.wraps(reference)
    def run(*args: Any) -> None:
        first = next(a for a in args if isinstance(a, Tensor))
        if first.is_cuda or INTERPRET_ON_CPU:
            return getattr(_triton(), name)(*args)
        with torch.profiler.record_function(REGION + name):
            reference(*args)

    return run


# Tests set this to run the Triton kernels under TRITON_INTERPRET=1 on CPU tensors.
INTERPRET_ON_CPU = False


@functools.cache
def _triton() -> Any:
    from rnnmt.models import triton_kernels

    return triton_kernels


def _f(x: Tensor) -> Tensor:
    return x.float()


@_stage
def gru_gates(x: Tensor, xc: Tensor | None, g: Tensor, h: Tensor, gates: Tensor, rh: Tensor, rh_c: Tensor) -> None:
    """gates = σ(x[:, :2H] [+ xc[:, :2H]] + g); rh = r∘h, also in rh_c's dtype."""
    H = h.shape[1]
    pre = _f(x[:, : 2 * H]) + _f(xc[:, : 2 * H]) if xc is not None else _f(x[:, : 2 * H])
    torch.sigmoid(pre + _f(g), out=gates)
    torch.mul(gates[:, H:], h, out=rh)
    rh_c.copy_(rh)


@_stage
def gru_state(x: Tensor, xc: Tensor | None, u: Tensor, gates: Tensor, h: Tensor, keep: Tensor | None, cand: Tensor, out: Tensor, out_c: Tensor) -> None:
    """h̃ = tanh(x[:, 2H:] [+ xc[:, 2H:]] + u) into cand; h' = h + keep∘z∘(h̃ − h) into out and out_c."""
    H = h.shape[1]
    pre = _f(x[:, 2 * H :]) + _f(xc[:, 2 * H :]) if xc is not None else _f(x[:, 2 * H :])
    torch.tanh(pre + _f(u), out=cand)
    step = (cand - h) * gates[:, :H]
    if keep is not None:
        step = step * keep
    torch.add(h, step, out=out)
    out_c.copy_(out)


@_stage
def gru_back_cand(base: Tensor, m: Tensor, extra: Tensor | None, mq: Tensor | None, gates: Tensor, cand: Tensor, keep: Tensor | None,
                  dh: Tensor, dx: Tensor, dx_c: Tensor) -> None:  # fmt: skip
    """dh = base + m [+ extra] [+ mq] (the gradient of a step's new state); d(h̃'s pre-activation) into dx[:, 2H:] and dx_c."""
    H = base.shape[1]
    total = base + _f(m)
    if extra is not None:
        total = total + _f(extra)
    if mq is not None:
        total = total + _f(mq)
    dh.copy_(total)
    dstep = dh * keep if keep is not None else dh
    torch.mul(dstep * gates[:, :H], 1.0 - cand * cand, out=dx[:, 2 * H :])
    dx_c[:, 2 * H :] = dx[:, 2 * H :]


@_stage
def gru_back_gates(dh: Tensor, drh: Tensor, gates: Tensor, cand: Tensor, h: Tensor, keep: Tensor | None, dx: Tensor, dx_c: Tensor, dzr_c: Tensor,
                   base: Tensor) -> None:  # fmt: skip
    """d(z, r pre-activations) into dx[:, :2H], dx_c and dzr_c; base = dh + drh∘r − dstep∘z (the previous state's
    gradient but for U_zr's product)."""
    H = dh.shape[1]
    z, r = gates[:, :H], gates[:, H:]
    dstep = dh * keep if keep is not None else dh
    d_rh = _f(drh)
    torch.mul(dstep * (cand - h) * (1.0 - z), z, out=dx[:, :H])
    torch.mul(d_rh * h * (1.0 - r), r, out=dx[:, H : 2 * H])
    dx_c[:, : 2 * H] = dx[:, : 2 * H]
    dzr_c[:, : 2 * H] = dx[:, : 2 * H]
    torch.sub(dh + d_rh * r, dstep * z, out=base)


@_stage
def additive_attention(keys: Tensor, q: Tensor, v: Tensor, mask: Tensor, ann: Tensor, tanh: Tensor, alpha: Tensor, ctx: Tensor, ctx_c: Tensor) -> None:
    """tanh(keys + q) into tanh [B, S, A]; α = softmax of its products with v over the mask; c = Σ_s α_s ann_s."""
    torch.tanh(keys + _f(q).unsqueeze(1), out=tanh)
    energy = (tanh * v).sum(-1).masked_fill(mask == 0, float("-inf"))
    torch.softmax(energy, dim=-1, out=alpha)
    torch.bmm(alpha.unsqueeze(1), ann, out=ctx.unsqueeze(1))
    ctx_c.copy_(ctx)


@_stage
def additive_attention_back(d_ctx: Tensor, dcx: Tensor | None, d_alpha: Tensor | None, ann: Tensor, alpha: Tensor, v: Tensor, tanh: Tensor,
                            dc: Tensor, de: Tensor, d_keys: Tensor, dq: Tensor, dq_c: Tensor) -> None:  # fmt: skip
    """dc = d_ctx [+ dcx]; de = softmax backward of dc·ann [+ d_alpha]; d_keys += de∘v∘(1 − tanh²); dq = its sum over S."""
    dc.copy_(_f(d_ctx) + _f(dcx) if dcx is not None else _f(d_ctx))
    d_weights = torch.bmm(ann, dc.unsqueeze(2)).squeeze(2)
    if d_alpha is not None:
        d_weights = d_weights + _f(d_alpha)
    torch.mul(alpha, d_weights - (alpha * d_weights).sum(-1, keepdim=True), out=de)
    d_pre = de.unsqueeze(2) * v * (1.0 - tanh * tanh)
    d_keys += d_pre
    torch.sum(d_pre, dim=1, out=dq)
    dq_c.copy_(dq)


@_stage
def lstm_cell(base: Tensor | None, gemm: Tensor, c_prev: Tensor, h_prev: Tensor | None, keep: Tensor | None, clip: float | None, gates: Tensor,
              c_raw: Tensor, tanh_c: Tensor, c_next: Tensor, h_next: Tensor, h_next_c: Tensor, fwd: Tensor | None, fwd_c: Tensor | None,
              fwd_mask: Tensor | None) -> None:  # fmt: skip
    """An LSTM step from its pre-activations [base +] gemm (torch's gate order i, f, g, o): the gates, c' = f∘c + i∘g,
    tanh(c') and h' = o∘tanh(c'); c' clipped to ±clip; with keep, both carried over where it is 0 (h_prev, c_prev).
    h' goes to h_next (and h_next_c); h'∘fwd_mask, the next layer's input, to fwd and fwd_c where given."""
    H = c_raw.shape[1]
    pre = _f(gemm) + _f(base) if base is not None else _f(gemm)
    torch.sigmoid(pre, out=gates)
    gates[:, 2 * H : 3 * H] = torch.tanh(pre[:, 2 * H : 3 * H])
    i, f, g, o = gates.chunk(4, dim=1)
    torch.add(f * c_prev, i * g, out=c_raw)
    torch.tanh(c_raw, out=tanh_c)
    h = o * tanh_c
    c = c_raw.clamp(-clip, clip) if clip is not None else c_raw
    if keep is not None:
        h_state, c = h_prev + keep * (h - h_prev), c_prev + keep * (c - c_prev)
    else:
        h_state = h
    c_next.copy_(c)
    h_next.copy_(h_state)
    h_next_c.copy_(h_state)
    out = h * fwd_mask if fwd_mask is not None else h
    if fwd is not None:
        fwd.copy_(out)
    if fwd_c is not None:
        fwd_c.copy_(out)


@_stage
def lstm_cell_back(rest: Tensor | None, own: Tensor | None, below: Tensor, below_mask: Tensor | None, extra: Tensor | None, keep: Tensor | None,
                   dc: Tensor, gates: Tensor, c_prev: Tensor, tanh_c: Tensor, c_raw: Tensor, clip: float | None, d_gates: Tensor,
                   d_gates_c: Tensor) -> None:  # fmt: skip
    """The gradient of `lstm_cell`: dh = [own +] [rest +] below[∘below_mask] [+ extra, on the last extra.shape[0] rows];
    with keep, the carried parts (dh into rest, dc) keep what the step did not take; d(pre-activations) into d_gates
    (and d_gates_c); dc becomes dL/dc_prev."""
    dh = _f(below) * below_mask if below_mask is not None else _f(below)
    if extra is not None:
        dh = torch.cat([dh[: dh.shape[0] - extra.shape[0]], dh[dh.shape[0] - extra.shape[0] :] + _f(extra)])
    if rest is not None:
        dh = rest + dh
    if own is not None:
        dh = _f(own) + dh
    dh_new, dc_new = dh, dc.clone()
    carried = torch.zeros_like(dc)
    if keep is not None:
        dh_new, dc_new = dh * keep, dc * keep
        rest.copy_(dh - dh_new)
        carried = dc - dc_new
    if clip is not None:
        dc_new = torch.where(c_raw.abs() <= clip, dc_new, 0.0)
    i, f, g, o = gates.chunk(4, dim=1)
    c_in = dc_new + dh_new * o * (1.0 - tanh_c * tanh_c)
    torch.cat([c_in * g * (1.0 - i) * i, c_in * c_prev * (1.0 - f) * f, c_in * i * (1.0 - g * g), dh_new * tanh_c * (1.0 - o) * o], dim=1, out=d_gates)
    d_gates_c.copy_(d_gates)
    torch.add(carried, c_in * f, out=dc)


@_stage
def dot_attention(top: Tensor, keys: Tensor, mask: Tensor, ann: Tensor, alpha: Tensor, ctx: Tensor, ctx_c: Tensor) -> None:
    """Global attention with a dot-product score (dot; general with keys W_a h̄_s): α = softmax of keys·top over the
    mask, c = Σ_s α_s h̄_s (also into ctx_c)."""
    energy = torch.bmm(keys, top.unsqueeze(2)).squeeze(2).masked_fill(mask == 0, float("-inf"))
    torch.softmax(energy, dim=-1, out=alpha)
    torch.bmm(alpha.unsqueeze(1), ann, out=ctx.unsqueeze(1))
    ctx_c.copy_(ctx)


@_stage
def dot_attention_back(d_ctop: Tensor, d_alpha: Tensor | None, ann: Tensor, alpha: Tensor, keys: Tensor, d_ctx: Tensor, d_scores: Tensor,
                       d_below: Tensor) -> None:  # fmt: skip
    """From d[c; h_top] [B, 2H] (W_c's product back): dc into d_ctx, the scores' gradient [+ d_alpha's] into d_scores,
    and h_top's whole gradient (through the scores and directly) into d_below."""
    H = ann.shape[2]
    d_ctx.copy_(d_ctop[:, :H])
    d_weights = torch.bmm(ann, d_ctx.unsqueeze(2)).squeeze(2)
    if d_alpha is not None:
        d_weights = d_weights + _f(d_alpha)
    torch.mul(alpha, d_weights - (alpha * d_weights).sum(-1, keepdim=True), out=d_scores)
    torch.add(torch.bmm(d_scores.unsqueeze(1), keys).squeeze(1), _f(d_ctop[:, H:]), out=d_below)


@_stage
def feed_tanh(bias: Tensor | None, pre: Tensor, h_tilde: Tensor, fed: Tensor | None, fed_c: Tensor | None, fed_mask: Tensor | None) -> None:
    """h̃ = tanh(pre [+ bias]); h̃[∘fed_mask], the next step's fed input, into fed and fed_c where given."""
    torch.tanh(_f(pre) + _f(bias) if bias is not None else _f(pre), out=h_tilde)
    if fed is not None:
        out = h_tilde * fed_mask if fed_mask is not None else h_tilde
        fed.copy_(out)
        fed_c.copy_(out)


@_stage
def feed_tanh_back(d_h_tilde: Tensor, d_fed: Tensor | None, fed_mask: Tensor | None, h_tilde: Tensor, d_pre: Tensor, d_pre_c: Tensor) -> None:
    """d(pre) = (dL/dh̃ [+ d_fed∘fed_mask, from the next step's input]) ∘ (1 − h̃²), also into d_pre_c."""
    d = _f(d_h_tilde)
    if d_fed is not None:
        d = d + (_f(d_fed) * fed_mask if fed_mask is not None else _f(d_fed))
    torch.mul(d, 1.0 - h_tilde * h_tilde, out=d_pre)
    d_pre_c.copy_(d_pre)
