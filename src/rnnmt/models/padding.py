"""Matrix-product operands padded with zeros to a multiple of bytes on a GPU.

cuBLAS takes its Hopper kernels only where every row of a product's operands starts on a 16-byte boundary.
RNNsearch's 620-wide embeddings and 500 maxout units (2 bytes a value in bfloat16: 1,240 and 1,000 bytes)
and Luong's 50,004-word vocabulary are not, and sent its products to Ampere kernels (`cutlass_80 …_align2`)
that took three times as long on an H100 (docs/performance.md). Zero columns add nothing to a product and
get a zero gradient, so padding changes what runs, not what is computed; a CPU pads nothing.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

# The multiple of bytes a product's rows are padded to, by device type.
ROW_BYTES = {"cuda": 16}


def padded(cols: int, dtype: torch.dtype, device: torch.device) -> int:
    """`cols` values of `dtype` rounded up to the device's multiple of bytes."""
    multiple = max(1, ROW_BYTES.get(device.type, 1) // dtype.itemsize)
    return -(-cols // multiple) * multiple


def pad_columns(x: Tensor, cols: int) -> Tensor:
    """x [..., F] with zero columns up to `cols` (itself where F is cols)."""
    return x if x.shape[-1] == cols else nn.functional.pad(x, (0, cols - x.shape[-1]))


def aligned_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """nn.functional.linear(x, weight, bias) with the input features and the outputs padded as the device wants
    them (the outputs' padding is sliced off: a view)."""
    kind = x.device.type
    # autocast runs a product of float32 operands in its dtype, and leaves other dtypes alone.
    dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) and x.dtype == torch.float32 else x.dtype
    N, K = weight.shape
    Np, Kp = padded(N, dtype, x.device), padded(K, dtype, x.device)
    if (Np, Kp) == (N, K):
        return nn.functional.linear(x, weight, bias)
    w = nn.functional.pad(weight.to(dtype), (0, Kp - K, 0, Np - N))
    b = nn.functional.pad(bias.to(dtype), (0, Np - N)) if bias is not None else None
    return nn.functional.linear(pad_columns(x.to(dtype), Kp), w, b)[..., :N]


class AlignedLinear(nn.Linear):
    """nn.Linear (the same parameters and state dict) whose product runs as `aligned_linear`."""

    def forward(self, x: Tensor) -> Tensor:
        return aligned_linear(x, self.weight, self.bias)
