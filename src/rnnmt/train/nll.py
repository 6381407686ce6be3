"""The training objective's per-sentence NLL: the output layer and the softmax cross-entropy fused over
the real target tokens.

The logits of padded positions never enter the loss, so they are not computed. `OutputNLL` does the
output layer's matrix product, the log-sum-exp and its gradient with one exponentiation of the logits
(torch's log_softmax + cross_entropy make two, plus their backward passes), in float32 or wider
whatever the weights' dtype: the value is −log softmax(W h + b)[y], exactly what `cross_entropy` gives.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable


class OutputNLL(torch.autograd.Function):
    """−log softmax(h Wᵀ + b)[y] for rows h [N, F] and targets y [N] (b may be None)."""

    @staticmethod
    def forward(ctx: Any, h: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor) -> Tensor:
        logits = torch.mm(h, weight.t()) if bias is None else torch.addmm(bias, h, weight.t())
        logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
        picked = logits.gather(1, target.unsqueeze(1)).squeeze(1)
        top = logits.amax(dim=1, keepdim=True)
        probs = logits.sub_(top).exp_()  # unnormalised softmax, in the logits' memory
        total = probs.sum(dim=1)
        ctx.has_bias = bias is not None
        ctx.save_for_backward(h, weight, probs, total, target)
        return total.log().add_(top.squeeze(1)).sub_(picked)

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        h, weight, probs, total, target = ctx.saved_tensors
        d_logits = probs * (grad / total).unsqueeze(1)  # softmax · g
        d_logits.scatter_add_(1, target.unsqueeze(1), -grad.unsqueeze(1))
        d_logits = d_logits.to(h.dtype)
        d_bias = d_logits.sum(dim=0) if ctx.has_bias else None
        return d_logits @ weight, d_logits.t() @ h, d_bias, None


def output_nll(hidden: Tensor, layer: nn.Linear, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
    """Summed token NLL per sentence [B] from the pre-output states hidden [B, T, F] (nats)."""
    rows = tgt_mask.flatten().nonzero().squeeze(1)
    nll = OutputNLL.apply(hidden.flatten(0, 1).index_select(0, rows), layer.weight, layer.bias, tgt.flatten().index_select(0, rows))
    return nll.new_zeros(tgt.numel()).index_put((rows,), nll).view_as(tgt).sum(dim=1)


class SentenceNLL(nn.Module):
    """A model's training objective as a module (what DistributedDataParallel wraps): NLL per sentence."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor) -> Tensor:
        hidden, _ = self.model.features(src, src_mask, tgt)
        return output_nll(hidden, self.model.decoder.output_layer, tgt, tgt_mask)
