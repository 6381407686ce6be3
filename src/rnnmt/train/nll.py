"""The training objective's per-sentence NLL: the output layer and the softmax cross-entropy fused over
the real target tokens.

The logits of padded positions never enter the loss, so they are not computed. `OutputNLL` does the
output layer's matrix product, the log-sum-exp and its gradient with one exponentiation of the logits
(torch's log_softmax + cross_entropy make two, plus their backward passes). Under autocast the matrix
products run in its dtype (bfloat16) and the softmax in float32: the value is −log softmax(W h + b)[y],
exactly what `cross_entropy` gives.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rnnmt.models.recurrence import explicit_precision


class Workspace:
    """The softmax buffer OutputNLL reuses from update to update.

    A batch's probabilities are ~10^7 floats: allocated afresh, every update would map and fault in new
    pages (allocators hand blocks that large straight to the kernel). The backward pass turns the buffer
    into the logits' gradient in place; autograd's version check makes a backward whose buffer another
    forward has overwritten since (or a second backward) an error, never a wrong gradient.
    """

    def __init__(self) -> None:
        self.buffer: Tensor | None = None
        self.fixed = False

    def reserve(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> None:
        """Allocate for the largest batch now and never again: captured CUDA graphs keep its address."""
        self.buffer, self.fixed = torch.empty(rows * cols, dtype=dtype, device=device), True

    def take(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        size = rows * cols
        if self.buffer is None or self.buffer.numel() < size or self.buffer.dtype != dtype or self.buffer.device != device:
            if self.fixed:
                raise RuntimeError(f"the reserved softmax buffer holds {self.buffer.numel():,} {self.buffer.dtype} values; {size:,} {dtype} were asked for")
            self.buffer = torch.empty(size, dtype=dtype, device=device)
        return self.buffer[:size].view(rows, cols)


class OutputNLL(torch.autograd.Function):
    """−log softmax(h Wᵀ + b)[y] for rows h [N, F] and targets y [N] (b may be None)."""

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, h: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, workspace: Workspace) -> Tensor:
        p = ctx.precision
        probs = workspace.take(h.shape[0], weight.shape[0], p.acc, h.device)
        # The logits: a product in the compute dtype, read into the (float32) workspace.
        logits = p.addmm(bias.to(p.acc).expand(h.shape[0], -1) if bias is not None else None, h, p.weight(weight.t()), out=probs)
        picked = logits.gather(1, target.unsqueeze(1)).squeeze(1)
        top = logits.amax(dim=1, keepdim=True)
        probs.sub_(top).exp_()  # unnormalised softmax
        total = probs.sum(dim=1)
        ctx.has_bias = bias is not None
        ctx.save_for_backward(h, weight, probs, total, target)
        return total.log().add_(top.squeeze(1)).sub_(picked)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        h, weight, probs, total, target = ctx.saved_tensors
        p = ctx.precision
        d_logits = probs.mul_((grad / total).unsqueeze(1))  # softmax · g, in the workspace
        d_logits.scatter_add_(1, target.unsqueeze(1), -grad.unsqueeze(1))
        d_bias = d_logits.sum(dim=0) if ctx.has_bias else None
        # (one conversion pass; torch's mixed-dtype elementwise kernels are several times slower)
        d_logits = p.weight(d_logits)
        return p.mm(d_logits, p.weight(weight)), p.mm(d_logits.t(), p.weight(h)), d_bias, None, None


# Under autocast the rows go to the output layer in multiples of this: oneDNN compiles a bfloat16 matrix
# product for every new shape (~15 ms on a CPU), and the number of real target tokens changes every batch.
ROW_MULTIPLE = 128


def output_nll(hidden: Tensor, layer: nn.Linear, tgt: Tensor, rows: Tensor, workspace: Workspace) -> Tensor:
    """Summed token NLL per sentence [B] from the pre-output states hidden [B, T, F] (nats); `rows` are the
    flat positions of the real target tokens in tgt [B, T] (`Batch.token_rows`)."""
    h, target = hidden.flatten(0, 1).index_select(0, rows), tgt.flatten().index_select(0, rows)
    if torch.is_autocast_enabled(hidden.device.type):
        extra = -len(rows) % ROW_MULTIPLE  # zero rows whose NLL is dropped: their gradient is 0
        h, target = torch.cat([h, h.new_zeros(extra, h.shape[1])]), torch.cat([target, target.new_zeros(extra)])
    nll = OutputNLL.apply(h, layer.weight, layer.bias, target, workspace)[: len(rows)]
    return nll.new_zeros(tgt.numel()).index_put((rows,), nll).view_as(tgt).sum(dim=1)


def masked_output_nll(hidden: Tensor, layer: nn.Linear, tgt: Tensor, tgt_mask: Tensor, workspace: Workspace) -> Tensor:
    """What `output_nll` sums, at static shapes: every position's NLL, padding's set to 0 (and so its gradient),
    so that no size depends on the number of real tokens (train/graphs.py)."""
    nll = OutputNLL.apply(hidden.flatten(0, 1), layer.weight, layer.bias, tgt.flatten(), workspace)
    return nll.view_as(tgt).masked_fill(~tgt_mask, 0.0).sum(dim=1)


class SentenceNLL(nn.Module):
    """A model's training objective as a module (what DistributedDataParallel wraps): NLL per sentence."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model
        self.workspace = Workspace()

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor, token_rows: Tensor | None = None) -> Tensor:
        """`token_rows` (Batch.token_rows): only the real target tokens' logits are computed; None: every
        position's, padding's masked (static shapes)."""
        hidden, _ = self.model.features(src, src_mask, tgt)
        if token_rows is None:
            return masked_output_nll(hidden, self.model.decoder.output_layer, tgt, tgt_mask, self.workspace)
        return output_nll(hidden, self.model.decoder.output_layer, tgt, token_rows, self.workspace)
