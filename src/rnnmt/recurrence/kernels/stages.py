"""The pointwise stages of the recurrent loops as single kernels (`train.recurrence: kernels`).

A teacher-forced update at paper size runs each of these stages once per step and layer, forward and
backward; as separate torch operations each is 4-15 kernel launches, which bound an update on a GPU
(docs/performance.md). A stage is declared once, here: a dataclass of its named operands (built by keyword,
so that no two can be swapped) with its torch reference (`reference`) and its Triton launcher (`launch`,
in triton_gru.py or triton_luong.py, which read the operands by name; the stages after the loops, the output
softmax and the optimiser's step, live with what they serve in train/kernel_stages.py). `run` takes the
Triton kernel on a CUDA device and the reference elsewhere; the reference is what the tests and the guard
(train/selfcheck.py) compare the kernel with, and what `rnnmt bench train` counts as one kernel on a CPU (its
profiler region is named `rnnmt::kernel::*`).

The forward stages' references compute the modules' equations by calling them (models/gru.py, lstm.py,
attention.py, decoders.py), so an edit there reaches this path too; the backward stages, like the Triton
kernels, are second forms of those equations, checked against autograd through the modules before a run
relies on them. Products come in their own dtype (bfloat16 under autocast); every stage computes in float32
and also writes, where a product reads the result next, a copy in the products' dtype, so no separate cast
runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import torch
from torch import Tensor

from rnnmt.models import attention, decoders, gru, lstm

# The profiler's name prefix for a stage run by its torch reference (bench.kernels counts each as one kernel).
REGION = "rnnmt::kernel::"

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


# While set (`checked`), a stage that would run its Triton kernel is handed to this instead (train/selfcheck.py
# runs both forms and compares them).
_checker: Callable[[Stage], None] | None = None


@contextlib.contextmanager
def checked(checker: Callable[[Stage], None]) -> Iterator[None]:
    """Hand every Triton stage to `checker` inside the block."""
    global _checker
    before, _checker = _checker, checker
    try:
        yield
    finally:
        _checker = before


class Stage:
    """A stage: its operands are a subclass's dataclass fields; it has a torch reference and a Triton launch."""

    name: ClassVar[str]
    launches: ClassVar[int] = 1  # Triton kernels per launch (rnnmt bench counts them)

    def reference(self) -> None:
        raise NotImplementedError

    def launch(self) -> None:
        """Its Triton kernel (each launch imports Triton where a kernel runs, and nothing elsewhere)."""
        raise NotImplementedError

    def run(self) -> None:
        """Its Triton kernel or its reference (inside a profiler region), as `implementation` says."""
        first = next(v for v in self.operands().values() if isinstance(v, Tensor))
        if runs_triton(first.device):
            return self.launch_checked() if _checker is None else _checker(self)
        with torch.profiler.record_function(REGION + self.name):
            self.reference()

    def launch_checked(self) -> None:
        """Its Triton kernel, once its operands are laid out as every kernel reads them (`layout_problem`)."""
        operands = self.operands()
        device = next(v for v in operands.values() if isinstance(v, Tensor)).device
        for name, value in operands.items():
            problem = layout_problem(value, device)
            if problem is not None:
                raise ValueError(f"stage {self.name}: operand {name} {problem}")
        self.launch()

    def operands(self) -> dict[str, object]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]


# The dtypes a kernel reads and writes: float32 states, bfloat16 (or float16) products.
KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def layout_problem(value: object, device: torch.device) -> str | None:
    """What in an operand's layout a Triton kernel would misread, in words (triton_common.py: 2-D operands are rows
    with a row stride and contiguous columns, wider ones contiguous, all on the stage's device); None where nothing is."""
    if not isinstance(value, Tensor):
        return None
    shape = "×".join(map(str, value.shape)) or "scalar"
    if value.device != device:
        return f"[{shape}] is on {value.device}, where the stage's first operand is on {device}"
    if value.is_floating_point() and value.dtype not in KERNEL_DTYPES:
        return f"[{shape}] is {value.dtype}; expected one of {', '.join(map(str, KERNEL_DTYPES))}"
    if value.dim() > 2 and not value.is_contiguous():
        return f"[{shape}] is not contiguous (strides {value.stride()}); expected contiguous memory"
    if 0 < value.dim() <= 2 and value.shape[-1] > 1 and value.stride(-1) != 1:
        return f"[{shape}] has its columns {value.stride(-1)} elements apart; expected contiguous columns"
    return None


STAGES: dict[str, type[Stage]] = {}
"""Every stage by name, in the order they are declared."""


def stage(name: str, launches: int = 1) -> Callable[[type[Stage]], type[Stage]]:
    """Declare a Stage subclass: its name and Triton launches; operands by keyword only."""

    def declare(cls: type[Stage]) -> type[Stage]:
        cls = dataclass(kw_only=True, eq=False)(cls)
        cls.name, cls.launches = name, launches
        STAGES[name] = cls
        return cls

    return declare


def widened(x: Tensor) -> Tensor:
    """x in float32 or wider (the guard runs the references in float64 too)."""
    return x.to(torch.promote_types(x.dtype, torch.float32))


def _with(x: Tensor, extra: Tensor | None) -> Tensor:
    """x [+ extra], in float32 or wider."""
    return widened(x) + widened(extra) if extra is not None else widened(x)


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
        gru.gates(torch.add(_with(self.x[:, : 2 * H], self.xc[:, : 2 * H] if self.xc is not None else None), widened(self.g), out=self.gates))
        torch.mul(self.gates[:, H:], self.h, out=self.rh)
        self.rh_c.copy_(self.rh)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.gru_gates(self)


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
        gru.candidate(torch.add(_with(self.x[:, 2 * H :], self.xc[:, 2 * H :] if self.xc is not None else None), widened(self.u), out=self.cand))
        gru.interpolate(self.h, self.gates[:, :H], self.cand, self.keep, out=self.out)
        self.out_c.copy_(self.out)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.gru_state(self)


@stage("gru_back_cand")
class GRUBackCand(Stage):
    """dh = base + m [+ extra] [+ mq] (the gradient of a step's new state); d(h̃'s pre-activation) into dx[:, 2H:] and dx_c."""

    base: Tensor
    m: Tensor
    extra: Tensor | None
    mq: Tensor | None
    gates: Tensor
    cand: Tensor
    keep: Tensor | None
    dh: Tensor
    dx: Tensor
    dx_c: Tensor

    def reference(self) -> None:
        H = self.base.shape[1]
        total = self.base + widened(self.m)
        if self.extra is not None:
            total = total + widened(self.extra)
        if self.mq is not None:
            total = total + widened(self.mq)
        self.dh.copy_(total)
        dstep = self.dh * self.keep if self.keep is not None else self.dh
        torch.mul(dstep * self.gates[:, :H], 1.0 - self.cand * self.cand, out=self.dx[:, 2 * H :])
        self.dx_c[:, 2 * H :] = self.dx[:, 2 * H :]

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.gru_back_cand(self)


@stage("gru_back_gates")
class GRUBackGates(Stage):
    """d(z, r pre-activations) into dx[:, :2H], dx_c and dzr_c; base = dh + drh∘r − dstep∘z (the previous state's
    gradient but for U_zr's product)."""

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
        torch.mul(dstep * (self.cand - self.h) * (1.0 - z), z, out=self.dx[:, :H])
        torch.mul(d_rh * self.h * (1.0 - r), r, out=self.dx[:, H : 2 * H])
        self.dx_c[:, : 2 * H] = self.dx[:, : 2 * H]
        self.dzr_c[:, : 2 * H] = self.dx[:, : 2 * H]
        torch.sub(self.dh + d_rh * r, dstep * z, out=self.base)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.gru_back_gates(self)


@stage("additive_attention", launches=2)
class AdditiveStep(Stage):
    """tanh(keys + q) into tanh [B, S, A] (attention.additive_terms); α = softmax of its products with v over the mask
    (additive_energies, attention_weights); c = Σ_s α_s ann_s (attention_context). Two kernels (triton_gru.py)."""

    keys: Tensor
    q: Tensor  # W_a s
    v: Tensor  # v_a [A]
    mask: Tensor  # 1 on real positions
    ann: Tensor
    tanh: Tensor
    alpha: Tensor
    ctx: Tensor
    ctx_c: Tensor

    def reference(self) -> None:
        B, S, A = self.tanh.shape
        attention.additive_terms(self.keys, widened(self.q).unsqueeze(1), out=self.tanh.unsqueeze(1))
        energy = attention.additive_energies(self.tanh.view(B * S, A), self.v.view(1, A)).view(B, S)
        attention.attention_weights(energy, self.mask != 0, out=self.alpha)
        attention.attention_context(self.alpha.unsqueeze(1), self.ann, out=self.ctx.unsqueeze(1))
        self.ctx_c.copy_(self.ctx)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.additive_attention(self)


@stage("additive_attention_back", launches=2)
class AdditiveStepBack(Stage):
    """dc = d_ctx [+ dcx]; de = softmax backward of dc·ann [+ d_alpha]; d_keys += de∘v∘(1 − tanh²); dq = its sum over S.
    Two kernels (triton_gru.py)."""

    d_ctx: Tensor
    dcx: Tensor | None
    d_alpha: Tensor | None
    ann: Tensor
    alpha: Tensor
    v: Tensor
    tanh: Tensor
    dc: Tensor
    de: Tensor
    d_keys: Tensor
    dq: Tensor
    dq_c: Tensor

    def reference(self) -> None:
        self.dc.copy_(_with(self.d_ctx, self.dcx))
        d_weights = torch.bmm(self.ann, self.dc.unsqueeze(2)).squeeze(2)
        if self.d_alpha is not None:
            d_weights = d_weights + widened(self.d_alpha)
        torch.mul(self.alpha, d_weights - (self.alpha * d_weights).sum(-1, keepdim=True), out=self.de)
        d_pre = self.de.unsqueeze(2) * self.v * (1.0 - self.tanh * self.tanh)
        self.d_keys += d_pre
        torch.sum(d_pre, dim=1, out=self.dq)
        self.dq_c.copy_(self.dq)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_gru

        triton_gru.additive_attention_back(self)


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
        self.gates.copy_(_with(self.gemm, self.base))
        _, c, _, h = lstm.cell(self.gates, self.c_prev, self.c_raw, self.tanh_c)
        c = c.clamp(-self.clip, self.clip) if self.clip is not None else c
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
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.lstm_cell(self)


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
        if self.clip is not None:
            dc_new = torch.where(self.c_raw.abs() <= self.clip, dc_new, 0.0)
        torch.add(carried, lstm.cell_backward(dh_new, dc_new, self.gates, self.c_prev, self.tanh_c, self.d_gates), out=self.dc)
        self.d_gates_c.copy_(self.d_gates)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.lstm_cell_back(self)


# The fast forms of Luong's scores and kinds the kernels compute (attention.py's Score.form and Kind.form): the
# Triton kernels' SCORE and KIND constants are their positions here.
SCORE_FORMS = ("dot", "concat", "location")
KIND_FORMS = ("global", "local-m", "local-p")


def _luong_positions(mask: Tensor, reversed_source: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The real positions, the sentence lengths n [B] and each position's original word index [B, S] (float)."""
    real = mask != 0
    n = real.sum(1).to(torch.float32)
    s = torch.arange(mask.shape[1], device=mask.device, dtype=torch.float32)
    return real, n, n.unsqueeze(1) - 1 - s if reversed_source else s.expand(mask.shape[0], -1)


class _LuongForms:
    """The score and kind forms of a Luong attention stage, as its kernels number them."""

    score: str
    kind: str

    @property
    def score_code(self) -> int:
        return SCORE_FORMS.index(self.score)

    @property
    def kind_code(self) -> int:
        return KIND_FORMS.index(self.kind)


@stage("luong_attention")
class LuongStep(_LuongForms, Stage):
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
        H, S = self.ann.shape[2], self.ann.shape[1]
        real, n, original = _luong_positions(self.mask, self.reversed_source)
        acc = self.alpha.dtype
        original, n = original.to(acc), n.to(acc)
        allowed = real
        if self.kind == "local-m":
            centre = attention.monotonic_centre(torch.full((1,), self.step, device=n.device), n.unsqueeze(1)).squeeze(1)
        if self.kind == "local-p":
            Q = self.q.shape[1]
            self.pos.copy_(attention.predicted_position(n, widened(self.q[:, Q - H :]), self.v_p.view(1, H), terms=self.tanh_u))
            centre = torch.floor(self.pos)
        if self.kind != "global":
            allowed = allowed & attention.within_window(original - centre.unsqueeze(1), self.window)
        if self.score == "dot":
            energy = attention.dot_energies(widened(self.top).unsqueeze(1), self.keys).squeeze(1)
        elif self.score == "concat":
            terms = attention.additive_terms(self.keys, widened(self.q[:, :H]).unsqueeze(1))
            energy = attention.additive_energies(terms.reshape(-1, H), self.v_a.view(1, H)).view(-1, S)
        else:
            slots = self.q.shape[1] - (H if self.kind == "local-p" else 0)
            energy = attention.location_energies(widened(self.q[:, :slots]).unsqueeze(1), n.long(), S).squeeze(1)
        weights = attention.attention_weights(energy.to(acc), allowed)
        if self.kind == "local-p":
            self.soft.copy_(weights)
            weights = weights * attention.gaussian(original - self.pos.unsqueeze(1), self.window)
        self.alpha.copy_(weights)
        attention.attention_context(self.alpha.unsqueeze(1), self.ann, out=self.ctx.unsqueeze(1))
        self.ctx_c.copy_(self.ctx)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.luong_attention(self)


@stage("luong_attention_back")
class LuongStepBack(_LuongForms, Stage):
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
        H = self.ann.shape[2]
        self.d_ctx.copy_(self.d_ctop[:, :H])
        d_weights = torch.bmm(self.ann, self.d_ctx.unsqueeze(2)).squeeze(2)
        if self.d_alpha is not None:
            d_weights = d_weights + widened(self.d_alpha)
        weights, d_soft = self.alpha, d_weights
        if self.kind == "local-p":
            real, n, original = _luong_positions(self.mask, self.reversed_source)
            offset = original.to(self.pos.dtype) - self.pos.unsqueeze(1)
            gauss = attention.gaussian(offset, self.window)
            weights, d_soft = self.soft, d_weights * gauss
            d_pos = (d_weights * self.soft * gauss * offset).sum(1) / (self.window / 2) ** 2
        torch.mul(weights, d_soft - (weights * d_soft).sum(-1, keepdim=True), out=self.d_scores)
        below = widened(self.d_ctop[:, H:])
        if self.score == "dot":
            below = below + torch.bmm(self.d_scores.unsqueeze(1), self.keys).squeeze(1)
        self.d_below.copy_(below)
        if self.score == "concat":
            t = torch.tanh(self.keys + widened(self.q[:, :H]).unsqueeze(1))
            d_pre = self.d_scores.unsqueeze(2) * widened(self.v_a) * (1.0 - t * t)
            self.d_keys += d_pre
            torch.sum(d_pre, dim=1, out=self.dq[:, :H])
            self.dv_rows += (self.d_scores.unsqueeze(2) * t).sum(1)
        if self.score == "location":
            slots = self.dq.shape[1] - (H if self.kind == "local-p" else 0)
            real, n, _ = _luong_positions(self.mask, self.reversed_source)
            slot = torch.arange(self.mask.shape[1], device=self.mask.device) + (slots - n.long()).unsqueeze(1)
            taken = self.d_scores * (slot >= 0)
            self.dq[:, :slots] = torch.zeros_like(self.dq[:, :slots]).scatter_add_(1, slot.clamp(0, slots - 1), taken)
        if self.kind == "local-p":
            sig = self.pos / n.to(self.pos.dtype)
            torch.mul(d_pos * n.to(self.pos.dtype), sig * (1.0 - sig), out=self.dz)
            torch.mul(self.dz.unsqueeze(1) * widened(self.v_p), 1.0 - self.tanh_u * self.tanh_u, out=self.dq[:, self.dq.shape[1] - H :])
        if self.dq_c is not None:
            self.dq_c.copy_(self.dq)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.luong_attention_back(self)


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
        decoders.attentional_state(_with(self.pre, self.bias), out=self.h_tilde)
        if self.fed is not None:
            out = self.h_tilde * self.fed_mask if self.fed_mask is not None else self.h_tilde
            self.fed.copy_(out)
            self.fed_c.copy_(out)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.feed_tanh(self)


@stage("feed_tanh_back")
class FeedTanhBack(Stage):
    """d(pre) = (dL/dh̃ [+ d_fed∘fed_mask, from the next step's input]) ∘ (1 − h̃²), also into d_pre_c."""

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
        torch.mul(d, 1.0 - self.h_tilde * self.h_tilde, out=self.d_pre)
        self.d_pre_c.copy_(self.d_pre)

    def launch(self) -> None:
        from rnnmt.recurrence.kernels import triton_luong

        triton_luong.feed_tanh_back(self)
