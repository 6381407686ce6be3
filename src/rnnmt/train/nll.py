"""The training objective's per-sentence NLL: the output layer and the softmax cross-entropy over the real
target tokens.

The logits of padded positions never enter the loss, so they are not computed. With the `plain` recurrence
the NLL is the model's output layer and torch's cross_entropy, which autograd differentiates (the reference);
the fast recurrences fuse them: `OutputNLL` does the output layer's matrix product, the log-sum-exp and its
gradient with one exponentiation of the logits (torch's log_softmax + cross_entropy make two, plus their
backward passes), its softmax as torch operations (`fused`) or as one stage (`kernels`). Under autocast the
matrix products run in its dtype (bfloat16) and the softmax in float32: the value is −log softmax(W h + b)[y],
exactly what `cross_entropy` gives.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn
from torch.autograd.function import once_differentiable

from rnnmt.models import padding
from rnnmt.recurrence import shared
from rnnmt.recurrence.precision import explicit_precision
from rnnmt.train import kernel_stages

if TYPE_CHECKING:
    from rnnmt.train.batching import Batch


class Workspace:
    """The [N, V] buffer OutputNLL reuses from update to update for the logits and then P − Y.

    A batch's logits are ~10^7 values: allocated afresh, every update would map and fault in new pages
    (allocators hand blocks that large straight to the kernel). Autograd's version check makes a backward
    pass whose buffer another forward pass has overwritten since an error, never a wrong gradient.
    """

    def __init__(self) -> None:
        self.buffer: Tensor | None = None
        self.fixed = False
        # On a CPU the softmax goes through cache-sized blocks of rows; off, it takes all rows at once, as on
        # a GPU (bench.kernel_count.kernels_per_update counts a GPU's kernels on a CPU so).
        self.blocked = True
        self.kernels = False  # the softmax as one stage (kernel_stages.OutputSoftmax), else as its torch reference
        self.padded: Tensor | None = None

    def reserve(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> None:
        """Allocate for the largest batch now and never again: captured CUDA graphs keep its address."""
        self.buffer, self.fixed = torch.empty(rows * padding.padded(cols, dtype, device), dtype=dtype, device=device), True

    def take(self, rows: int, cols: int, dtype: torch.dtype, device: torch.device) -> Tensor:
        size = rows * cols
        if self.buffer is None or self.buffer.numel() < size or self.buffer.dtype != dtype or self.buffer.device != device:
            if self.fixed:
                raise RuntimeError(f"the reserved softmax buffer holds {self.buffer.numel():,} {self.buffer.dtype} values; {size:,} {dtype} were asked for")
            self.buffer = torch.empty(size, dtype=dtype, device=device)
        return self.buffer[:size].view(rows, cols)

    def weight(self, weight: Tensor, dtype: torch.dtype) -> Tensor:
        """The output layer's weight [V, F] in `dtype` as the products read it: on a GPU with zero rows and columns up to
        the device's multiple (models/padding.py; their logits, P − Y and gradients are 0; the real values are
        copied in every pass)."""
        V, F = weight.shape
        shape = (padding.padded(V, dtype, weight.device), padding.padded(F, dtype, weight.device))
        if shape == (V, F):
            return weight.to(dtype)
        if self.padded is None or self.padded.shape != shape or self.padded.dtype != dtype or self.padded.device != weight.device:
            self.padded = weight.new_zeros(shape, dtype=dtype)
        self.padded[:V, :F].copy_(weight)
        return self.padded


class OutputNLL(torch.autograd.Function):
    """−log softmax(h Wᵀ + b)[y] for rows h [N, F] and targets y [N] (b may be None).

    The logits' gradient is g ∘ (P − Y): softmax P minus the one-hot targets Y, each row scaled by its
    incoming gradient g. The forward pass leaves P − Y in the workspace, in the products' dtype, and the
    backward pass moves g past the products: dh = g ∘ ((P − Y) W), dW = (P − Y)ᵀ (g ∘ h), db = (P − Y)ᵀ g.
    So the only [N, V] matrix the backward pass reads is the one its products read, and the forward
    pass takes the logits through max, exp and sum a cache-sized block of rows at a time on a CPU.
    """

    @staticmethod
    @explicit_precision
    def forward(ctx: Any, h: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, workspace: Workspace) -> Tensor:
        p = ctx.precision
        N, V = h.shape[0], weight.shape[0]
        w = workspace.weight(weight, p.compute)
        logits = workspace.take(N, w.shape[0], p.compute, h.device)
        torch.mm(padding.pad_columns(h.to(p.compute), w.shape[1]), w.t(), out=logits)  # the logits, until each block becomes P − Y
        nll = torch.empty(N, dtype=p.acc, device=h.device)
        step = max(1, CACHE_FLOATS // V) if workspace.blocked and h.device.type == "cpu" else N
        for start in range(0, N, step):
            rows = slice(start, min(N, start + step))
            softmax = kernel_stages.OutputSoftmax(logits=logits[rows, :V], bias=bias, target=target[rows], nll=nll[rows])
            softmax.run() if workspace.kernels else softmax.reference()
        ctx.has_bias, ctx.vocab = bias is not None, V
        shared.save(ctx, h=h, w=w, delta=logits)
        return nll

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
        s = shared.saved(ctx)
        h, w, delta = s.h, s.w, s.delta
        p, g, V, F = ctx.precision, grad.unsqueeze(1), ctx.vocab, h.shape[1]
        d_h = p.mm(delta, w)[:, :F].mul_(g)
        d_weight = p.mm(delta.t(), p.weight(padding.pad_columns(h * g, w.shape[1])))[:V, :F]
        d_bias = p.mm(g.t(), delta[:, :V]).squeeze(0) if ctx.has_bias else None
        return d_h, d_weight, d_bias, None, None


# Logits per block of rows in OutputNLL's forward pass on a CPU: 1 MiB of float32, within a core's L2 cache
# (38 rows of a 6.7k vocabulary; 36–256 rows measured, docs/performance.md).
CACHE_FLOATS = 2**18


# Under autocast the rows go to the output layer in multiples of this: oneDNN compiles a bfloat16 matrix
# product for every new shape (~15 ms on a CPU), and the number of real target tokens changes every batch.
ROW_MULTIPLE = 128


def _widened(logits: Tensor) -> Tensor:
    """Logits in float32 or wider, as the softmax takes them (bfloat16 ones under autocast)."""
    return logits.to(torch.promote_types(logits.dtype, torch.float32))


def output_nll(hidden: Tensor, layer: nn.Linear, tgt: Tensor, rows: Tensor, workspace: Workspace | None) -> Tensor:
    """Summed token NLL per sentence [B] from the pre-output states hidden [B, T, F] (nats); `rows` are the
    flat positions of the real target tokens in tgt [B, T] (`Batch.token_rows`). Without a workspace, the
    output layer's own forward and cross_entropy (the reference)."""
    h, target = hidden.flatten(0, 1).index_select(0, rows), tgt.flatten().index_select(0, rows)
    if workspace is None:
        nll = nn.functional.cross_entropy(_widened(layer(h)), target, reduction="none")
        return nll.new_zeros(tgt.numel()).index_put((rows,), nll).view_as(tgt).sum(dim=1)
    if torch.is_autocast_enabled(hidden.device.type):
        extra = -len(rows) % ROW_MULTIPLE  # zero rows whose NLL is dropped: their gradient is 0
        h, target = torch.cat([h, h.new_zeros(extra, h.shape[1])]), torch.cat([target, target.new_zeros(extra)])
    nll = OutputNLL.apply(h, layer.weight, layer.bias, target, workspace)[: len(rows)]
    return nll.new_zeros(tgt.numel()).index_put((rows,), nll).view_as(tgt).sum(dim=1)


def masked_output_nll(hidden: Tensor, layer: nn.Linear, tgt: Tensor, tgt_mask: Tensor, workspace: Workspace | None) -> Tensor:
    """What `output_nll` sums, at static shapes: every position's NLL, padding's set to 0 (and so its gradient),
    so that no size depends on the number of real tokens (train/graphs.py)."""
    if workspace is None:
        nll = nn.functional.cross_entropy(_widened(layer(hidden.flatten(0, 1))), tgt.flatten(), reduction="none")
    else:
        nll = OutputNLL.apply(hidden.flatten(0, 1), layer.weight, layer.bias, tgt.flatten(), workspace)
    return nll.view_as(tgt).masked_fill(~tgt_mask, 0.0).sum(dim=1)


class SentenceNLL(nn.Module):
    """A model's training objective as a module (what DistributedDataParallel wraps): NLL per sentence, in the
    form of the model's recurrence (`train.recurrence`: see the module's docstring)."""

    def __init__(self, model: nn.Module, recurrence: str) -> None:
        super().__init__()
        self.model = model
        self.workspace = Workspace() if recurrence != "plain" else None
        if self.workspace is not None:
            self.workspace.kernels = recurrence == "kernels"

    def forward(self, src: Tensor, src_mask: Tensor, tgt: Tensor, tgt_mask: Tensor, token_rows: Tensor | None = None) -> Tensor:
        """`token_rows` (Batch.token_rows): only the real target tokens' logits are computed; None: every
        position's, padding's masked (static shapes)."""
        hidden, _ = self.model.features(src, src_mask, tgt)
        if token_rows is None:
            return masked_output_nll(hidden, self.model.decoder.output_layer, tgt, tgt_mask, self.workspace)
        return output_nll(hidden, self.model.decoder.output_layer, tgt, token_rows, self.workspace)


def sentence_nll(objective: nn.Module, batch: Batch) -> Tensor:
    """Summed token NLL per sentence [B] (nats), from a `SentenceNLL` (or its DDP wrapper)."""
    return objective(batch.src, batch.src_mask, batch.tgt, batch.tgt_mask, batch.token_rows)
