"""The dtypes the fast loops compute in, and the weight gradients they share.

Under autocast (`train.precision: bfloat16`) the matrix products run in bfloat16 and everything else
(states, gates, softmax, gradients) in float32: `Precision` holds the two dtypes, and `explicit_precision`
runs an autograd Function's forward with autocast off after keeping them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor


@dataclass(frozen=True)
class Precision:
    """Matrix products in `compute` (autocast's dtype while autocast is on), the rest in `acc` (≥ float32)."""

    compute: torch.dtype
    acc: torch.dtype

    @staticmethod
    def of(x: Tensor) -> Precision:
        device = x.device.type
        acc = torch.promote_types(x.dtype, torch.float32)
        return Precision(torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else acc, acc)

    def weight(self, w: Tensor) -> Tensor:
        """A matrix as the products read it (cast once per pass)."""
        return w.to(self.compute)

    def mm(self, a: Tensor, b: Tensor) -> Tensor:
        """a @ b in b's dtype (a `weight`), returned in the accumulation dtype."""
        return torch.mm(a.to(b.dtype), b).to(self.acc)

    def addmm(self, base: Tensor | None, a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
        """base + a @ b (or a @ b without a base) with the product in b's dtype, the result in the accumulation dtype."""
        if a.dtype == b.dtype == self.acc:
            return torch.mm(a, b, out=out) if base is None else torch.addmm(base, a, b, out=out)
        product = torch.mm(a.to(b.dtype), b)
        # A conversion, then a float32 addition: torch's mixed-dtype elementwise kernels are slow.
        if base is not None and out is not None and out.data_ptr() == base.data_ptr():
            return out.add_(product.to(self.acc))
        result = product.to(self.acc) if out is None else out.copy_(product)
        return result if base is None else result.add_(base)

    def buffer(self, x: Tensor, *shape: int, zero: bool = False) -> Tensor:
        return (torch.zeros if zero else torch.empty)(*shape, dtype=self.acc, device=x.device)

    def steps_first(self, x: Tensor) -> Tensor:
        """[B, T, ...] as a contiguous [T, B, ...] copy in the accumulation dtype."""
        return x.transpose(0, 1).to(self.acc, memory_format=torch.contiguous_format, copy=True)


def explicit_precision(forward: Callable[..., Any]) -> Callable[..., Any]:
    """Run a Function's forward with autocast off, after keeping the dtypes it asked for as ctx.precision."""

    @functools.wraps(forward)
    def wrapper(ctx: Any, *args: Any) -> Any:
        x = next(a for a in args if isinstance(a, Tensor))
        ctx.precision = Precision.of(x)
        with torch.autocast(x.device.type, enabled=False):
            return forward(ctx, *args)

    return wrapper


def weight_grad(p: Precision, d_out: Tensor, inputs: Tensor) -> Tensor:
    """Σ over all steps and rows of d_outᵀ·input, one matrix product: [..., O] and [..., I] -> [O, I]."""
    return p.mm(d_out.reshape(-1, d_out.shape[-1]).t(), p.weight(inputs.reshape(-1, inputs.shape[-1])))
