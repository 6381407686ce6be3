"""Stacked LSTMs as Luong et al. run them (paper-spec §4.1): one torch.nn.LSTM's weights.

`run` uses torch's kernel over a whole sequence (cuDNN on a GPU), all layers at once, or one position
at a time (`step`) where Luong's clipping of the cell state to ±50 after every step needs it: the
reference. `cell` writes out the step torch's LSTM computes, for the fast loops that run the layers
themselves (recurrence/fused.py, the kernel stages), which train/selfcheck.py checks against torch's.
Clipping c_t after computing h_t = o ∘ tanh(c_t) leaves h_t as it is: tanh saturates long before ±50.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from rnnmt.models.initialisation import Rule, Scheme
from rnnmt.runtime import cpu_has_bfloat16

State = tuple[Tensor, Tensor]  # (h, c), each [layers, B, H]


def make_lstm(input_size: int, hidden: int, layers: int, dropout: float, bias: bool) -> nn.LSTM:
    """Batch-first stacked LSTM; dropout on the input of layers 2..L (the caller drops layer 1's input)."""
    return nn.LSTM(input_size, hidden, layers, bias=bias, batch_first=True, dropout=dropout if layers > 1 else 0.0)


def init_rules(lstm: nn.LSTM, scheme: Scheme) -> dict[str, Rule]:
    """Every layer's input and recurrent matrices as weights (the orthogonal rule is GroundHog's GRU's), its biases as biases."""
    # GroundHog's scheme has no LSTM; it draws an LSTM's biases as weights, as it did when it matched parameter
    # names, so a seed still gives the same model.
    bias = scheme.weight if scheme.name == "groundhog" else scheme.bias
    rules: dict[str, Rule] = {}
    for k in range(lstm.num_layers):
        rules |= {f"weight_ih_l{k}": scheme.weight, f"weight_hh_l{k}": scheme.weight}
        if lstm.bias:
            rules |= {f"bias_ih_l{k}": bias, f"bias_hh_l{k}": bias}
    return rules


def pack_state(state: State) -> Tensor:
    """(h, c) as one batch-first tensor [B, 2, layers, H], whose rows a search can reorder."""
    return torch.stack(state).permute(2, 0, 1, 3)


def unpack_state(packed: Tensor) -> State:
    """The inverse of `pack_state`."""
    return packed[:, 0].transpose(0, 1).contiguous(), packed[:, 1].transpose(0, 1).contiguous()


def clip_cell(c: Tensor, clip: float | None) -> Tensor:
    """Luong's forward clipping of the cell state to ±clip (none without a clip)."""
    return c.clamp(-clip, clip) if clip is not None else c


def clip_state(state: State, clip: float | None) -> State:
    """`clip_cell` on a state's cell (h is already within ±1)."""
    return state[0], clip_cell(state[1], clip)


def call(lstm: nn.LSTM, x: Tensor | nn.utils.rnn.PackedSequence, state: State | None) -> tuple[Tensor | nn.utils.rnn.PackedSequence, State]:
    """torch's LSTM (oneDNN's on a CPU). Under bfloat16 autocast on a CPU without bfloat16 instructions oneDNN has
    no bfloat16 LSTM (it cannot create the primitive): there it runs in float32 instead."""
    device = lstm.weight_hh_l0.device.type
    if device == "cpu" and torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.bfloat16 and not cpu_has_bfloat16():
        with torch.autocast(device, enabled=False):
            if isinstance(x, Tensor):
                x = x.float()
            else:
                x = x._replace(data=x.data.float())
            state = tuple(s.float() for s in state) if state is not None else None
            return lstm(x, state)
    return lstm(x, state)


def step(lstm: nn.LSTM, x: Tensor, state: State, clip: float | None) -> tuple[Tensor, State]:
    """One position [B, input] -> top-layer output [B, H] and the new state."""
    out, new = call(lstm, x.unsqueeze(1), state)
    return out.squeeze(1), clip_state(new, clip)


def run(lstm: nn.LSTM, x: Tensor, mask: Tensor, state: State | None, clip: float | None, packed: bool = True) -> tuple[Tensor, State]:
    """All positions of [B, T, input] with right padding -> outputs [B, T, H] and each row's final state.

    Without clipping (and with `packed`) the fused kernel runs over packed sequences, so the final state is
    the one after each row's last real position; otherwise the loop carries the state over padded positions.
    """
    if clip is None and packed:
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, final = call(lstm, packed, state)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        return out, final
    batch, layers = x.shape[0], lstm.num_layers
    if state is None:
        zeros = x.new_zeros(layers, batch, lstm.hidden_size)
        state = (zeros, zeros)
    outputs = []
    for t in range(x.shape[1]):
        out, new = step(lstm, x[:, t], state, clip)
        keep = mask[:, t].view(1, batch, 1)
        state = (torch.where(keep, new[0], state[0]), torch.where(keep, new[1], state[1]))
        outputs.append(out)
    return torch.stack(outputs, dim=1), state


def dropout_multipliers(shape: tuple[int, ...], p: float, like: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Inverted-dropout multipliers (0 or 1/(1 − p)), drawn as nn.functional.dropout draws them on a CPU.

    Both recurrences draw their masks here, so the kernel and fused loops see the same ones on every device
    (on CUDA nn.functional.dropout runs its own fused kernel, whose draws differ from bernoulli_'s)."""
    return like.new_empty(shape, dtype=dtype or like.dtype).bernoulli_(1 - p).div_(1 - p)


def between_layers(x: Tensor, hidden: int, p: float) -> Tensor:
    """Dropout multipliers for an upper layer's input [B, T, hidden], steps-first in memory as the fast loops
    write their outputs."""
    return dropout_multipliers((x.shape[1], x.shape[0], hidden), p, x, torch.float32).transpose(0, 1)


def layer_weights(lstm: nn.LSTM) -> list[tuple[Tensor, Tensor]]:
    """Each layer's (W_ih, W_hh), as torch's LSTM holds them: what the fast loops read of it."""
    return [(weights[0], weights[1]) for weights in lstm.all_weights]


def summed_biases(lstm: nn.LSTM) -> list[Tensor | None]:
    """Each layer's b_ih + b_hh (None without biases): the bias of the gates' pre-activations."""
    return [weights[2] + weights[3] if lstm.bias else None for weights in lstm.all_weights]


def cell(
    pre: Tensor, c: Tensor, c_new: Tensor | None = None, tanh_c: Tensor | None = None, h_new: Tensor | None = None
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One step of torch.nn.LSTM from the pre-activations [B, 4H] (torch's gate order i, f, g, o; activated in
    place into the gates) and the previous cell c: c' = f∘c + i∘g, h' = o∘tanh(c'). nmt.matlab's
    code/layers/lstmUnitForward.m computes the same (its gates stacked i, f, o, a). Returns the gates, c',
    tanh(c') and h' (into the given tensors)."""
    H = c.shape[1]
    pre[:, : 2 * H].sigmoid_()
    pre[:, 2 * H : 3 * H].tanh_()
    pre[:, 3 * H :].sigmoid_()
    i, f, g, o = pre[:, :H], pre[:, H : 2 * H], pre[:, 2 * H : 3 * H], pre[:, 3 * H :]
    c_new = torch.mul(f, c, out=c_new).addcmul_(i, g)
    tanh_c = torch.tanh(c_new, out=tanh_c)
    return pre, c_new, tanh_c, torch.mul(o, tanh_c, out=h_new)


def clipped_cell_grad(dc: Tensor, c_raw: Tensor, clip: float | None) -> Tensor:
    """dL/dc' back through `clip_cell` (c' before its clip: c_raw): 0 where the clip held c' at ±clip (as autograd's
    clamp gives, an infinite dL/dc' included)."""
    return torch.where(c_raw.abs() <= clip, dc, 0.0) if clip is not None else dc


def cell_backward(dh: Tensor, dc: Tensor, gates: Tensor, c_prev: Tensor, tanh_c: Tensor, d_gates: Tensor) -> Tensor:
    """The gradient of `cell` from dL/dh' and dL/dc' (its backward, written once: the fast loops' backward passes and
    the kernel stages' references call it): writes d(pre-activations) [B, 4H] into d_gates, returns dL/dc."""
    H = c_prev.shape[1]
    i, f, g, o = gates[:, :H], gates[:, H : 2 * H], gates[:, 2 * H : 3 * H], gates[:, 3 * H :]
    dc = dc + torch.ops.aten.tanh_backward(dh * o, tanh_c)
    torch.ops.aten.sigmoid_backward.grad_input(dc * g, i, grad_input=d_gates[:, :H])
    torch.ops.aten.sigmoid_backward.grad_input(dc * c_prev, f, grad_input=d_gates[:, H : 2 * H])
    torch.ops.aten.tanh_backward.grad_input(dc * i, g, grad_input=d_gates[:, 2 * H : 3 * H])
    torch.ops.aten.sigmoid_backward.grad_input(dh * tanh_c, o, grad_input=d_gates[:, 3 * H :])
    return dc * f
