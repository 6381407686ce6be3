"""nmtpy's layer-normalised GRU (`model.encoder_norm: layer`), the published Multi30k system's encoder cell.

nmtpy's `gru_step_lnorm` (lium-lst/nmtpy nmtpy/layers.py l. 84–103, its `layer_norm` l. 65–68 after Ba, Kiros &
Hinton 2016) normalises four sums apart, each with its own gain s and bias b (ones and zeros at first,
`init_layer_norm` l. 70–80):

    [r; u] = σ(LN₃(U_ru h) + LN₁(W_ru x + b_ru))
    h̃      = tanh(LN₄(U h) ∘ r + LN₂(W x + b))
    h'     = u ∘ h̃ + (1 − u) ∘ h

It is dl4mt's GRU, not GroundHog's (models/gru.py): the reset gate multiplies U h after the product, and the
input's sums carry biases. LN(v) = s ∘ (v − mean(v)) / √(var(v) + 10⁻⁵) + b over the features of one row, with
the population variance: `torch.nn.LayerNorm`'s. The [r; u] sums are normalised together, 2H features at once, as
nmtpy's. The equations after the normalisations are `gates` and `candidate` (and gru.py's `interpolate`); `step`
composes them, and so does the fused loop (recurrence/fused.py, `LayerNormGRUScan`), which train/selfcheck.py checks
against autograd through `step` before a run relies on it.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.gru import ScannedGRU, interpolate
from rnnmt.models.initialisation import Rule, Scheme, ones, zeros
from rnnmt.models.loops import PLAIN, Loops

EPS = 1.0e-5  # nmtpy's layer_norm(…, eps=1e-5)


def gates(rec: Tensor, x_gates: Tensor) -> Tensor:
    """[r; u] = σ(LN₃(U_ru h) + LN₁(W_ru x + b_ru)) from the normalised sums rec [N, 2H] and x_gates [N, 2H]."""
    return torch.sigmoid(rec + x_gates)


def candidate(rec: Tensor, r: Tensor, x_cand: Tensor) -> Tensor:
    """h̃ = tanh(LN₄(U h) ∘ r + LN₂(W x + b)) from the normalised sums rec [N, H] and x_cand [N, H]."""
    return torch.tanh(rec * r + x_cand)


class LayerNormGRU(ScannedGRU):
    """One layer-normalised GRU layer over a sequence; inputs projected (and normalised) for all positions at once."""

    def __init__(self, input_size: int, hidden_size: int, loops: Loops = PLAIN) -> None:
        super().__init__(hidden_size, loops)
        H = hidden_size
        self.W_in = nn.Linear(input_size, 3 * H)  # [W_r; W_u; W] with their biases (nmtpy's W, b and Wx, bx)
        self.U_gates = nn.Linear(H, 2 * H, bias=False)  # [U_r; U_u]
        self.U_cand = nn.Linear(H, H, bias=False)  # U
        self.norm_in_gates = nn.LayerNorm(2 * H, eps=EPS)  # s1, b1
        self.norm_in_cand = nn.LayerNorm(H, eps=EPS)  # s2, b2
        self.norm_rec_gates = nn.LayerNorm(2 * H, eps=EPS)  # s3, b3
        self.norm_rec_cand = nn.LayerNorm(H, eps=EPS)  # s4, b4

    def init_rules(self, scheme: Scheme) -> dict[str, Rule]:
        """W as a weight, the input's biases as biases, [U_r; U_u] and U as recurrent matrices; gains 1, biases 0."""
        rules = {"W_in.weight": scheme.weight, "W_in.bias": scheme.bias, "U_gates.weight": scheme.recurrent, "U_cand.weight": scheme.recurrent}
        for norm in ("norm_in_gates", "norm_in_cand", "norm_rec_gates", "norm_rec_cand"):
            rules.update({f"{norm}.weight": ones, f"{norm}.bias": zeros})
        return rules

    def recurrent_weights(self) -> tuple[Tensor, ...]:
        """[U_r; U_u], U, and LN₃'s and LN₄'s gains and biases, as the fused scan takes them."""
        rec_gates, rec_cand = self.norm_rec_gates, self.norm_rec_cand
        return self.U_gates.weight, self.U_cand.weight, rec_gates.weight, rec_gates.bias, rec_cand.weight, rec_cand.bias

    def project_inputs(self, x: Tensor) -> Tensor:
        """[LN₁(W_ru x + b_ru); LN₂(W x + b)] for every position: [..., input] -> [..., 3·hidden]."""
        H = self.hidden_size
        pre = self.W_in(x)
        return torch.cat([self.norm_in_gates(pre[..., : 2 * H]), self.norm_in_cand(pre[..., 2 * H :])], dim=-1)

    def step(self, x_proj: Tensor, h: Tensor, keep: Tensor | None = None) -> Tensor:
        """One update of rows [N, H] from the normalised projected input [N, 3H]; rows whose keep [N, 1] is 0 carry
        the state over."""
        H = self.hidden_size
        ru = gates(self.norm_rec_gates(self.U_gates(h)), x_proj[:, : 2 * H])
        r, u = ru[:, :H], ru[:, H:]
        return interpolate(h, u, candidate(self.norm_rec_cand(self.U_cand(h)), r, x_proj[:, 2 * H :]), keep)
