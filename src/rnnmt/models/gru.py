"""The GRU of GroundHog (Bahdanau et al. 2014, paper-spec §1.2, §1.4).

It differs from torch.nn.GRUCell in three ways, so it is written out: the reset gate multiplies the
state *before* the recurrent matrix, U(r ∘ h); the update gate weighs the new candidate,
h = (1 − z) ∘ h_prev + z ∘ h̃; and only the candidate has a bias.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.kernels.loops import scan_directions
from rnnmt.models.kernels.padding import AlignedLinear
from rnnmt.models.initialisation import Rule, Scheme
from rnnmt.models.recurrence import GRUScan


class GroundhogGRU(nn.Module):
    """One GRU layer; inputs are projected for all time steps at once, the recurrence step by step.

    `fused` (the default) runs `scan` with the hand-written backward of recurrence.py; False runs the
    plain loop over `step`, which autograd differentiates (the reference the tests compare with).
    `kernels` runs it as kernels/loops.py does, each step's pointwise work as single kernels (the GPU path).
    """

    fused = True
    kernels = False

    def __init__(self, input_size: int, hidden_size: int, context_size: int = 0) -> None:
        super().__init__()
        self.hidden_size = hidden_size
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

    def recurrent_weights(self) -> tuple[Tensor, Tensor, Tensor]:
        """U_zr, U and the candidate's bias, as the scans take them."""
        return self.U_gates.weight, self.U_cand.weight, self.b_cand

    def step(self, x_proj: Tensor, h: Tensor) -> Tensor:
        """One update of rows [N, H] from the projected input (W·x [+ C·c]) [N, 3H] and the previous state."""
        H = self.hidden_size
        z, r = torch.addmm(x_proj[:, : 2 * H], h, self.U_gates.weight.t()).sigmoid_().chunk(2, dim=-1)
        h_cand = torch.addmm(x_proj[:, 2 * H :] + self.b_cand, r * h, self.U_cand.weight.t()).tanh_()
        return h + z * (h_cand - h)

    def scan(self, x_proj: Tensor, mask: Tensor | None, reverse: bool = False, h0: Tensor | None = None) -> Tensor:
        """Run over [B, T, 3H] projected inputs from h0 (default 0); masked steps carry the state over (GroundHog)."""
        batch, steps, _ = x_proj.shape
        h = x_proj.new_zeros(batch, self.hidden_size) if h0 is None else h0
        if self.kernels:
            return scan_directions([x_proj], mask, [reverse], [h], [self.recurrent_weights()])[0]
        if self.fused:
            return GRUScan.apply(x_proj, h, mask, reverse, self.U_gates.weight, self.U_cand.weight, self.b_cand)
        keep = (mask if mask is not None else x_proj.new_ones(batch, steps, dtype=torch.bool)).unsqueeze(-1).to(x_proj.dtype)
        out = [None] * steps
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        for t in order:
            h_new = self.step(x_proj[:, t], h)
            h = h + keep[:, t] * (h_new - h)
            out[t] = h
        return torch.stack(out, dim=1)
