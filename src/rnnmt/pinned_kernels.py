"""What reproducible mode runs on a CPU instead of MKL: matrix products, QR and exp/log/sqrt through NumPy.

MKL picks its code by the CPU's vendor as well as its instruction sets. Capped at AVX2 (`MKL_CBWR=AVX2,STRICT`)
its matrix products still give other bits on an AMD CPU than on an Intel one for many shapes (single and
batched products alike), and so do its vector functions (VML: exp, log, sqrt) and its QR (the orthogonal
initialisation); its vendor-neutral mode, `MKL_CBWR=COMPATIBLE`, halved the demo's training speed and still
left sqrt apart. So in reproducible mode these operators are registered anew for CPU tensors, each as NumPy's
(`install`): products and QR by NumPy's OpenBLAS, whose kernels depend on `OPENBLAS_CORETYPE` alone (pinned
to Haswell, one thread), and exp, log and sqrt by NumPy's own loops (AVX-512 off). Measured natively on an
AMD EPYC and under `qemu-x86_64 -cpu Haswell-v4` (an Intel CPU's identification): every operator here gave
other bits through torch and the same through NumPy (tests/test_reproducible.py). The equations do not
change; the sums run in OpenBLAS's order, so the digits differ from MKL's (the demo's tables are those of
this mode).

Registered with torch.library below the autograd key: autograd's formulas call the same operators, so
backward passes take them too. GPUs are untouched (only the CPU dispatch key is replaced).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import Tensor

# NumPy has no bfloat16 or float16: those products run in float32 and round once, as torch's own do.
_NUMPY_FLOATS = (torch.float32, torch.float64)


def _array(t: Tensor) -> np.ndarray:
    """The tensor's memory as a NumPy array (no copy; autograd is above this layer)."""
    return t.detach().numpy()


def _matmul(a: Tensor, b: Tensor) -> Tensor:
    """a @ b (matrix, batch of matrices or vector operands) by NumPy, in the operands' dtype."""
    if a.dtype in _NUMPY_FLOATS or not a.is_floating_point():
        return torch.from_numpy(np.asarray(np.matmul(_array(a), _array(b))))
    return torch.from_numpy(np.matmul(_array(a.float()), _array(b.float()))).to(a.dtype)


def _scaled(product: Tensor, alpha: Any) -> Tensor:
    return product if alpha == 1 else product.mul_(alpha)


def _plus(base: Tensor, product: Tensor, beta: Any, alpha: Any) -> Tensor:
    """beta·base + alpha·product (base ignored where beta is 0, NaNs included, as BLAS does)."""
    product = _scaled(product, alpha)
    if beta == 0:
        return product
    return product.add_(base) if beta == 1 else product.add_(base, alpha=beta)


def _into(out: Tensor, value: Tensor) -> Tensor:
    """Write `value` into an `out=` tensor (resized as torch's out= variants do)."""
    if out.shape != value.shape:
        out.resize_(value.shape)
    return out.copy_(value)


def _summed_batches(batch1: Tensor, batch2: Tensor) -> Tensor:
    """Σ_b batch1[b] @ batch2[b] as one product: [A_1 … A_B] @ [B_1; …; B_B]."""
    n, k = batch1.shape[1], batch1.shape[2]
    return _matmul(batch1.transpose(0, 1).reshape(n, -1), batch2.reshape(-1, batch2.shape[2])) if k else batch1.new_zeros(n, batch2.shape[2])


def _products() -> dict[str, Callable[..., Tensor]]:
    """The BLAS operators by their schema names."""
    mm = lambda self, mat2: _matmul(self, mat2)  # noqa: E731
    addmm = lambda self, mat1, mat2, *, beta=1, alpha=1: _plus(self, _matmul(mat1, mat2), beta, alpha)  # noqa: E731
    baddbmm = lambda self, b1, b2, *, beta=1, alpha=1: _plus(self, _matmul(b1, b2), beta, alpha)  # noqa: E731
    addbmm = lambda self, b1, b2, *, beta=1, alpha=1: _plus(self, _summed_batches(b1, b2), beta, alpha)  # noqa: E731
    addmv = lambda self, mat, vec, *, beta=1, alpha=1: _plus(self, _matmul(mat, vec), beta, alpha)  # noqa: E731
    functional = {"mm": mm, "bmm": mm, "mv": mm, "dot": mm, "vdot": mm, "addmm": addmm, "baddbmm": baddbmm, "addbmm": addbmm, "addmv": addmv}
    table: dict[str, Callable[..., Tensor]] = dict(functional)
    for name, fn in functional.items():
        table[f"{name}.out"] = _product_into if fn is mm else functools.partial(_out_variant, fn)
        if name.startswith("add") or name == "baddbmm":
            table[f"{name}_"] = functools.partial(_inplace_variant, fn)
    return table


def _product_into(a: Tensor, b: Tensor, *, out: Tensor) -> Tensor:
    """a @ b written straight into `out` where NumPy can (NumPy copies where out overlaps an operand)."""
    if out.dtype == a.dtype in _NUMPY_FLOATS and out.shape == torch.Size(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])) + _matrix_shape(a, b):
        np.matmul(_array(a), _array(b), out=_array(out))
        return out
    return _into(out, _matmul(a, b))


def _matrix_shape(a: Tensor, b: Tensor) -> tuple[int, ...]:
    """The trailing shape of a @ b: (rows, columns) for matrices, shorter where an operand is a vector."""
    return tuple(a.shape[-2:-1] if a.dim() > 1 else ()) + tuple(b.shape[-1:] if b.dim() > 1 else ())


def _out_variant(fn: Callable[..., Tensor], *args: Any, out: Tensor, **kwargs: Any) -> Tensor:
    return _into(out, fn(*args, **kwargs))


def _inplace_variant(fn: Callable[..., Tensor], self: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    return self.copy_(fn(self, *args, **kwargs))


def _qr(a: Tensor, mode: str = "reduced") -> tuple[Tensor, Tensor]:
    """torch.linalg.qr by NumPy's LAPACK (OpenBLAS), in the input's dtype."""
    q, r = np.linalg.qr(_array(a.double() if a.dtype not in _NUMPY_FLOATS else a), mode=mode)
    return torch.from_numpy(np.ascontiguousarray(q)).to(a.dtype), torch.from_numpy(np.ascontiguousarray(r)).to(a.dtype)


def _unary(ufunc: np.ufunc) -> dict[str, Callable[..., Tensor]]:
    """An elementwise function by NumPy's loop: functional, out= and in-place forms."""

    def value(x: Tensor) -> Tensor:
        if x.dtype in _NUMPY_FLOATS:
            return torch.from_numpy(np.asarray(ufunc(_array(x))))
        return torch.from_numpy(ufunc(_array(x.float()))).to(x.dtype if x.is_floating_point() else torch.get_default_dtype())

    return {"": value, ".out": lambda x, *, out: _into(out, value(x)), "_": lambda x: x.copy_(value(x))}


@functools.cache
def install() -> None:
    """Register the operators above for CPU tensors, once per process (kept for the process's life)."""
    library = torch.library.Library("aten", "IMPL")
    kernels = {**_products(), "linalg_qr": _qr}
    for name, ufunc in {"exp": np.exp, "log": np.log, "sqrt": np.sqrt}.items():
        kernels |= {name + suffix: fn for suffix, fn in _unary(ufunc).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Overriding a previously registered kernel": that is the point
        for name, fn in kernels.items():
            library.impl(name, fn, "CPU")
    _LIBRARIES.append(library)  # a Library's registrations end when it is collected
    torch.backends.mkldnn.enabled = False  # torch's LSTM through ATen's own loops and the products above, not oneDNN's RNN


_LIBRARIES: list[Any] = []
