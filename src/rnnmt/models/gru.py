"""The GRU of GroundHog (Bahdanau et al. 2014, paper-spec §1.2, §1.4).

It differs from torch.nn.GRUCell in three ways, so it is written out: the reset gate multiplies the
state *before* the recurrent matrix, U(r ∘ h); the update gate weighs the new candidate,
h = (1 − z) ∘ h_prev + z ∘ h̃; and only the candidate has a bias.

The equations are the functions `gates`, `candidate` and `interpolate` (GroundHog's
`RecurrentLayer.step_fprop`, groundhog/layers/rec_layers.py), given the pre-activations (the sums of the
products with the weights); `step` composes them, and so do the fast loops (recurrence/fused.py's forward,
the kernel stages' torch references), so an edit here reaches every path. Their gradients are written once too
(`candidate_grad`, `gates_grad`, `previous_state_grad`), for the fast loops' hand-written backward passes and the
kernel stages' references: a second form, checked against autograd through `step` before a run relies on it
(train/selfcheck.py). An edit of an equation reaches the check, not the gradients: its fast loops fall back.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.initialisation import Rule, Scheme
from rnnmt.models.loops import PLAIN, Loops
from rnnmt.models.padding import AlignedLinear


def gates(pre: Tensor) -> Tensor:
    """[z; r] = σ(pre) from the gates' pre-activations pre = W_zr x [+ C_zr c] + U_zr h [N, 2H] (in place)."""
    return pre.sigmoid_()


def candidate(pre: Tensor) -> Tensor:
    """h̃ = tanh(pre) from the candidate's pre-activation pre = W x + b [+ C c] + U (r ∘ h) [N, H] (in place)."""
    return pre.tanh_()


def interpolate(h: Tensor, z: Tensor, cand: Tensor, keep: Tensor | None = None, out: Tensor | None = None) -> Tensor:
    """h' = h + z ∘ (h̃ − h); rows whose keep is 0 (padding) carry h over."""
    step = (cand - h).mul_(z)
    if keep is not None:
        step.mul_(keep)
    return torch.add(h, step, out=out)


def candidate_grad(d_step: Tensor, z: Tensor, cand: Tensor, out: Tensor) -> Tensor:
    """d(h̃'s pre-activation) = d_step ∘ z ∘ (1 − h̃²) into out, d_step the new state's gradient (∘ keep)."""
    return torch.ops.aten.tanh_backward.grad_input(d_step * z, cand, grad_input=out)


def gates_grad(d_step: Tensor, d_rh: Tensor, h: Tensor, z: Tensor, r: Tensor, cand: Tensor, out: Tensor) -> None:
    """d(z's, r's pre-activations) into out [N, 2H]: d_step ∘ (h̃ − h) through z, d(r∘h) ∘ h through r."""
    H = h.shape[1]
    torch.ops.aten.sigmoid_backward.grad_input(d_step * (cand - h), z, grad_input=out[:, :H])
    torch.ops.aten.sigmoid_backward.grad_input(d_rh * h, r, grad_input=out[:, H:])


def previous_state_grad(d: Tensor, d_rh: Tensor, r: Tensor, d_step: Tensor, z: Tensor) -> Tensor:
    """d + d(r∘h) ∘ r − d_step ∘ z, in place on d: the previous state's gradient through r∘h and the interpolation, d
    holding the new state's gradient (and the gates' products with U_zr, where the caller adds them first)."""
    return d.addcmul_(d_rh, r).sub_(d_step * z)


class ScannedGRU(nn.Module):
    """A GRU layer's run over a sequence, given its `step`; `scan` runs it by the model's loops (models/loops.py):
    `steps` itself, the reference that autograd differentiates, or a fast form of it."""

    def __init__(self, hidden_size: int, loops: Loops) -> None:
        super().__init__()
        self.hidden_size = hidden_size
        self.loops = loops

    def step(self, x_proj: Tensor, h: Tensor, keep: Tensor | None = None) -> Tensor:
        """One update of rows [N, H] from the projected input [N, 3H]; rows whose keep [N, 1] is 0 carry h over."""
        raise NotImplementedError

    def scan(self, x_proj: Tensor, mask: Tensor | None, reverse: bool = False, h0: Tensor | None = None) -> Tensor:
        """Run over [B, T, 3H] projected inputs from h0 (default 0); masked steps carry the state over."""
        h = x_proj.new_zeros(x_proj.shape[0], self.hidden_size) if h0 is None else h0
        return self.loops.gru_scans([self], [x_proj], mask, [reverse], [h])[0]

    def steps(self, x_proj: Tensor, mask: Tensor | None, reverse: bool, h0: Tensor) -> Tensor:
        """`scan` as written: `step` at each position, in order."""
        steps = x_proj.shape[1]
        keep = mask.unsqueeze(-1).to(x_proj.dtype) if mask is not None else None
        out: list[Tensor] = [h0] * steps
        h = h0
        for t in range(steps - 1, -1, -1) if reverse else range(steps):
            h = out[t] = self.step(x_proj[:, t], h, keep[:, t] if keep is not None else None)
        return torch.stack(out, dim=1)


class GroundhogGRU(ScannedGRU):
    """One GRU layer; inputs are projected for all time steps at once, the recurrence step by step."""

    def __init__(self, input_size: int, hidden_size: int, context_size: int = 0, loops: Loops = PLAIN) -> None:
        super().__init__(hidden_size, loops)
        # [W_z; W_r; W] applied to the input; the candidate's bias is the only bias (§1.2).
        self.W_in = AlignedLinear(input_size, 3 * hidden_size, bias=False)  # 620-wide embeddings: padding.py
        self.b_cand = nn.Parameter(torch.zeros(hidden_size))
        self.U_gates = nn.Linear(hidden_size, 2 * hidden_size, bias=False)  # [U_z; U_r]
        self.U_cand = nn.Linear(hidden_size, hidden_size, bias=False)  # U
        # [C_z; C_r; C] for the decoder's context input (§1.4); absent in encoders.
        self.C_in = nn.Linear(context_size, 3 * hidden_size, bias=False) if context_size else None

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """W and C as weights, [U_z; U_r] and U as recurrent matrices, the candidate's bias as a bias."""
        rules = {"W_in.weight": scheme.weight, "b_cand": scheme.bias, "U_gates.weight": scheme.recurrent, "U_cand.weight": scheme.recurrent}
        if self.C_in is not None:
            rules["C_in.weight"] = scheme.weight
        return rules

    def project_inputs(self, x: Tensor) -> Tensor:
        """W·x for every position: [..., input] -> [..., 3·hidden]."""
        return self.W_in(x)

    def project_context(self, c: Tensor, base: Tensor | None = None) -> Tensor:
        """C·c: [..., context] -> [..., 3·hidden]; `base` + C·c as one product for rows [N, ·]."""
        assert self.C_in is not None, "this GRU was built without a context input"
        return self.C_in(c) if base is None else torch.addmm(base, c, self.C_in.weight.t())

    def context_weight(self) -> Tensor:
        """C = [C_z; C_r; C], as a fast decoder loop reads it at each step."""
        assert self.C_in is not None, "this GRU was built without a context input"
        return self.C_in.weight

    def recurrent_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """U_zr, U and the candidate's bias, as the scans take them."""
        return self.U_gates.weight, self.U_cand.weight, self.b_cand

    def step(self, x_proj: Tensor, h: Tensor, keep: Tensor | None = None) -> Tensor:
        """One update of rows [N, H] from the projected input (W·x [+ C·c]) [N, 3H] and the previous state;
        rows whose keep [N, 1] is 0 carry the state over."""
        H = self.hidden_size
        zr = gates(torch.addmm(x_proj[:, : 2 * H], h, self.U_gates.weight.t()))
        z, r = zr[:, :H], zr[:, H:]
        return interpolate(h, z, candidate(torch.addmm(x_proj[:, 2 * H :] + self.b_cand, r * h, self.U_cand.weight.t())), keep)
