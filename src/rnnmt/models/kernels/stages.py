"""The pointwise stages of the recurrent loops as single kernels (`train.recurrence: kernels`).

A teacher-forced update at paper size runs each of these stages once per step and layer, forward and
backward; as separate torch operations each is 4-15 kernel launches, which bound an update on a GPU
(docs/performance.md). Here each stage is one function that runs as one Triton kernel on a CUDA device
(triton_gru.py, triton_luong.py) and as the same arithmetic in torch operations elsewhere: that is the
reference the tests and the guard (selfcheck.py) compare the Triton kernels with, and what `rnnmt bench
train` counts as one kernel on a CPU (its profiler region is named `rnnmt::kernel::*`).

The equations are GroundHog's GRU and attention (recurrence.py's notation): gates g = σ(x_zr [+ C_zr c] +
U_zr h), r∘h, h̃ = tanh(x_h + b [+ C c] + U(r∘h)), h' = h + m∘z∘(h̃ − h); e_s = v·tanh(keys_s + W_a s),
α = softmax over the real positions, c = Σ_s α_s h_s; and Luong's LSTM cell, attention and h̃ (the stages'
docstrings). Products come in their own dtype (bfloat16 under autocast); every stage computes in float32
and also writes, where a product reads the result next, a copy in the products' dtype, so no separate cast
runs.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

# The profiler's name prefix for a stage run by its torch reference (bench.kernels counts each as one kernel).
REGION = "rnnmt::kernel::"

# Every stage's name, in the order they are defined.
STAGES: list[str] = []

# The Triton kernels a stage launches where more than one (triton_gru.py says why; bench.py counts them).
LAUNCHES = {"additive_attention": 2, "additive_attention_back": 2}

# What runs a stage: "auto" (its Triton kernel on a CUDA device, its torch reference elsewhere), "triton"
# (the kernel on any tensors: a CPU's need TRITON_INTERPRET=1) or "reference".
_implementation = "auto"


@contextlib.contextmanager
def implementation(name: str) -> Iterator[None]:
    """Run every stage as `name` ("auto", "triton" or "reference") inside the block."""
    global _implementation
    before, _implementation = _implementation, name
    try:
        yield
    finally:
        _implementation = before


def runs_triton(device: torch.device) -> bool:
    """Whether the stages run their Triton kernels on `device`."""
    return _implementation == "triton" or (_implementation == "auto" and device.type == "cuda")


# While set (`checked`), a stage that would run its Triton kernel calls this instead with its name, the
# kernel, the reference and its arguments (selfcheck.py runs both and compares them).
_checker: Callable[[str, Callable[..., None], Callable[..., None], tuple[Any, ...]], None] | None = None


@contextlib.contextmanager
def checked(checker: Callable[[str, Callable[..., None], Callable[..., None], tuple[Any, ...]], None]) -> Iterator[None]:
    """Hand every Triton stage to `checker` inside the block."""
    global _checker
    before, _checker = _checker, checker
    try:
        yield
    finally:
        _checker = before


def _stage(reference: Callable[..., None]) -> Callable[..., None]:
    """Run a stage as its Triton kernel or as `reference` (inside a profiler region), as `implementation` says."""
    name = reference.__name__
    STAGES.append(name)

    def kernel(*args: Any) -> None:
        triton_launchers()[name](*args)

    @functools.wraps(reference)
    def run(*args: Any) -> None:
        first = next(a for a in args if isinstance(a, Tensor))
        if runs_triton(first.device):
            return kernel(*args) if _checker is None else _checker(name, kernel, reference, args)
        with torch.profiler.record_function(REGION + name):
            reference(*args)

    return run


@functools.cache
def triton_launchers() -> dict[str, Callable[..., None]]:
    """Each stage's Triton launcher by name (importing Triton, and compiling nothing yet)."""
    from rnnmt.models.kernels import triton_gru, triton_luong, triton_update

    modules = (triton_gru, triton_luong, triton_update)
    return {name: getattr(module, name) for module in modules for name in STAGES if hasattr(module, name)}


def _f(x: Tensor) -> Tensor:
    """x in float32 or wider (selfcheck.py runs the references in float64 too)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


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


# Luong's scores and kinds (attention.LuongAttention) as the Triton kernels number them.
LUONG_SCORES = {"dot": 0, "general": 0, "concat": 1, "location": 2}  # general's keys are W_a h̄_s, made before the loop
LUONG_KINDS = {"global": 0, "local-m": 1, "local-p": 2}


def _luong_positions(mask: Tensor, reversed_source: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The real positions, the sentence lengths n [B] and each position's original word index [B, S] (float)."""
    real = mask != 0
    n = real.sum(1).to(torch.float32)
    s = torch.arange(mask.shape[1], device=mask.device, dtype=torch.float32)
    return real, n, n.unsqueeze(1) - 1 - s if reversed_source else s.expand(mask.shape[0], -1)


@_stage
def luong_attention(top: Tensor, q: Tensor | None, keys: Tensor, mask: Tensor, ann: Tensor, v_a: Tensor | None, v_p: Tensor | None, step: int,
                    window: int, reversed_source: bool, score: str, kind: str, alpha: Tensor, soft: Tensor | None, ctx: Tensor, ctx_c: Tensor,
                    pos: Tensor | None, tanh_u: Tensor | None) -> None:  # fmt: skip
    """One step of Luong's attention (attention.LuongAttention.forward) for top states h_t [B, H] at 0-based target
    step `step`: the scores (dot/general keys·h_t; concat v_a·tanh(h̄_s + W_a h_t); location (W_a h_t) at each
    position's slot), the window (local-m centred on min(step, n − 1); local-p on ⌊p_t⌋, p_t = n·σ(v_p·tanh(W_p h_t))
    into pos, tanh(W_p h_t) into tanh_u), the softmax over the allowed positions (0 where none is) into soft (local-p)
    and, times local-p's Gaussian, into alpha; c = Σ_s α_s h̄_s into ctx and ctx_c. q holds the step's query
    product h_t·W_qᵀ, W_q stacking W_a (concat: H rows; location: one per slot) over W_p (local-p: the last H rows);
    dot and general need none."""
    H = ann.shape[2]
    real, n, original = _luong_positions(mask, reversed_source)
    acc = alpha.dtype
    allowed = real
    if kind == "local-m":
        centre = torch.minimum(torch.full_like(n, step), n - 1)
    if kind == "local-p":
        torch.tanh(_f(q[:, q.shape[1] - H :]), out=tanh_u)
        torch.mul(n.to(acc), torch.sigmoid(tanh_u @ _f(v_p)), out=pos)
        centre = torch.floor(pos)
    if kind != "global":
        allowed = allowed & ((original.to(acc) - centre.to(acc).unsqueeze(1)).abs() <= window)
    if score in ("dot", "general"):
        energy = torch.bmm(keys, _f(top).unsqueeze(2)).squeeze(2)
    elif score == "concat":
        energy = (torch.tanh(keys + _f(q[:, :H]).unsqueeze(1)) * _f(v_a)).sum(-1)
    else:
        slots = q.shape[1] - (H if kind == "local-p" else 0)
        slot = torch.arange(mask.shape[1], device=mask.device) + (slots - n.long()).unsqueeze(1)
        energy = _f(q[:, :slots]).gather(1, slot.clamp(0, slots - 1))
        allowed = allowed & (slot >= 0)
    weights = torch.softmax(energy.to(acc).masked_fill(~allowed, float("-inf")), dim=-1).nan_to_num(0.0)
    if kind == "local-p":
        soft.copy_(weights)
        weights = weights * torch.exp(-((original.to(acc) - pos.unsqueeze(1)) ** 2) / (2 * (window / 2) ** 2))
    alpha.copy_(weights)
    torch.bmm(alpha.unsqueeze(1), ann, out=ctx.unsqueeze(1))
    ctx_c.copy_(ctx)


@_stage
def luong_attention_back(d_ctop: Tensor, d_alpha: Tensor | None, ann: Tensor, alpha: Tensor, soft: Tensor | None, keys: Tensor, q: Tensor | None,
                         mask: Tensor, v_a: Tensor | None, v_p: Tensor | None, pos: Tensor | None, tanh_u: Tensor | None, window: int,
                         reversed_source: bool, score: str, kind: str, d_ctx: Tensor, d_scores: Tensor, d_below: Tensor, dq: Tensor | None,
                         dq_c: Tensor | None, d_keys: Tensor | None, dv_rows: Tensor | None, dz: Tensor | None) -> None:  # fmt: skip
    """The gradient of `luong_attention` from d[c; h_t] [B, 2H] (W_c's product back) [and dL/dα]: dc into d_ctx, the
    scores' gradient into d_scores, h_t's gradient through the scores (dot, general) and directly into d_below, the
    query product's gradient into dq and dq_c; concat adds the keys' gradient into d_keys and Σ_s de_s·tanh(·) into
    dv_rows; local-p writes d(v_p·tanh(W_p h_t)) into dz. The window's centre ⌊p_t⌋ has no gradient."""
    H = ann.shape[2]
    d_ctx.copy_(d_ctop[:, :H])
    d_weights = torch.bmm(ann, d_ctx.unsqueeze(2)).squeeze(2)
    if d_alpha is not None:
        d_weights = d_weights + _f(d_alpha)
    weights, d_soft = alpha, d_weights
    if kind == "local-p":
        real, n, original = _luong_positions(mask, reversed_source)
        offset = original.to(pos.dtype) - pos.unsqueeze(1)
        gauss = torch.exp(-(offset**2) / (2 * (window / 2) ** 2))
        weights, d_soft = soft, d_weights * gauss
        d_pos = (d_weights * soft * gauss * offset).sum(1) / (window / 2) ** 2
    torch.mul(weights, d_soft - (weights * d_soft).sum(-1, keepdim=True), out=d_scores)
    below = _f(d_ctop[:, H:])
    if score in ("dot", "general"):
        below = below + torch.bmm(d_scores.unsqueeze(1), keys).squeeze(1)
    d_below.copy_(below)
    if score == "concat":
        t = torch.tanh(keys + _f(q[:, :H]).unsqueeze(1))
        d_pre = d_scores.unsqueeze(2) * _f(v_a) * (1.0 - t * t)
        d_keys += d_pre
        torch.sum(d_pre, dim=1, out=dq[:, :H])
        dv_rows += (d_scores.unsqueeze(2) * t).sum(1)
    if score == "location":
        slots = dq.shape[1] - (H if kind == "local-p" else 0)
        real, n, _ = _luong_positions(mask, reversed_source)
        slot = torch.arange(mask.shape[1], device=mask.device) + (slots - n.long()).unsqueeze(1)
        taken = d_scores * (slot >= 0)
        dq[:, :slots] = torch.zeros_like(dq[:, :slots]).scatter_add_(1, slot.clamp(0, slots - 1), taken)
    if kind == "local-p":
        sig = pos / n.to(pos.dtype)
        torch.mul(d_pos * n.to(pos.dtype), sig * (1.0 - sig), out=dz)
        torch.mul(dz.unsqueeze(1) * _f(v_p), 1.0 - tanh_u * tanh_u, out=dq[:, dq.shape[1] - H :])
    if dq_c is not None:
        dq_c.copy_(dq)


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


@_stage
def output_softmax(logits: Tensor, bias: Tensor | None, target: Tensor, nll: Tensor) -> None:
    """Per row of logits [N, V] (+ bias): nll = log Σ exp − the target's logit; the row becomes P − Y, the softmax
    minus the one-hot target, in the logits' dtype (train/nll.py's OutputNLL)."""
    x = _f(logits)  # a copy under autocast, else the logits themselves
    if bias is not None:
        x.add_(_f(bias))
    top = x.amax(dim=1)
    picked = x.gather(1, target.unsqueeze(1)).squeeze(1)
    x.sub_(top.unsqueeze(1)).exp_()  # unnormalised softmax
    total = x.sum(dim=1)
    torch.log(total, out=nll).add_(top).sub_(picked)
    x.div_(total.unsqueeze(1)).scatter_add_(1, target.unsqueeze(1), x.new_full((x.shape[0], 1), -1.0))
    if x is not logits:
        logits.copy_(x)


def _clipped(param: Tensor, grad: Tensor, norm: Tensor, max_norm: float) -> Tensor:
    """GroundHog's clipping (train/optim.py's clip_gradients): grad·max_norm/norm where norm ≥ max_norm; 0.1·param
    where the norm is not finite."""
    factor = torch.where(norm >= max_norm, max_norm / norm, torch.ones_like(norm))
    return torch.where(torch.isfinite(norm), grad * factor, 0.1 * param)


@_stage
def adadelta_update(param: Tensor, grad: Tensor, square_avg: Tensor, acc_delta: Tensor, norm: Tensor, lr: float, max_norm: float, rho: float,
                    eps: float) -> None:  # fmt: skip
    """The clipped gradient g, then Adadelta as torch.optim.Adadelta computes it: E[g²] ← ρE[g²] + (1−ρ)g²,
    Δ = √(E[Δ²] + ε) / √(E[g²] + ε) · g, E[Δ²] ← ρE[Δ²] + (1−ρ)Δ², param ← param − lr·Δ."""
    g = _clipped(param, grad, norm, max_norm)
    square_avg.mul_(rho).addcmul_(g, g, value=1 - rho)
    delta = acc_delta.add(eps).sqrt_().div_(square_avg.add(eps).sqrt_()).mul_(g)
    acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
    param.add_(delta, alpha=-lr)


@_stage
def sgd_update(param: Tensor, grad: Tensor, norm: Tensor, lr: float, max_norm: float) -> None:
    """The clipped gradient g, then plain SGD: param ← param − lr·g."""
    param.add_(_clipped(param, grad, norm, max_norm), alpha=-lr)
