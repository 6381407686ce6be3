"""Every operator rnnmt/pinned_kernels.py replaces, before and after `install`, in one process: the largest
difference per operator and form as JSON (test_reproducible.py runs this in a subprocess, since the
replacement lasts for the process's life)."""

from __future__ import annotations

import json

import torch


def results() -> dict[str, torch.Tensor]:
    """Each operator (functional, out= and in-place forms; autograd; bfloat16) on the same float64 inputs."""
    g = torch.Generator().manual_seed(0)
    r = lambda *shape, dtype=torch.float64: torch.randn(*shape, generator=g, dtype=dtype)  # noqa: E731
    a, b, c, A, B, v = r(5, 7), r(7, 3), r(3), r(4, 5, 7), r(4, 7, 3), r(7)
    x = torch.rand(6, 5, generator=g, dtype=torch.float64) + 0.1
    out = {
        "mm": a @ b,
        "addmm": torch.addmm(c, a, b, beta=0.5, alpha=2),
        "bmm": torch.bmm(A, B),
        "baddbmm": torch.baddbmm(torch.ones(4, 5, 3, dtype=torch.float64), A, B, beta=2),
        "addbmm": torch.addbmm(torch.ones(5, 3, dtype=torch.float64), A, B),
        "mv": a @ v,
        "addmv": torch.addmv(r(5), a, v),
        "dot": v @ v,
        "exp": x.exp(),
        "log": x.log(),
        "sqrt": x.sqrt(),
        "qr": torch.linalg.qr(a @ a.T)[0].abs(),
        "matmul": torch.matmul(A, b),
        "linear": torch.nn.functional.linear(A, b.T, c),
        "mm.out into a view": torch.mm(a, b, out=torch.zeros(7, 5, dtype=torch.float64)[1:6, 1:4]).clone(),
        "addmm.out over its input": torch.addmm(c.expand(5, 3).clone(), a, b, out=c.expand(5, 3).clone()),
        "addmm_": c.expand(5, 3).clone().addmm_(a, b),
        "exp_": x.clone().exp_(),
        "sqrt.out": torch.sqrt(x, out=torch.empty(6, 5, dtype=torch.float64)),
        "bfloat16 mm": (a.bfloat16() @ b.bfloat16()).double(),
    }
    w = a.clone().requires_grad_()
    torch.nn.functional.linear(w, b.T, c).exp().sum().backward()
    out["autograd"] = w.grad
    return out


if __name__ == "__main__":
    before = results()
    from rnnmt import pinned_kernels

    pinned_kernels.install()
    after = results()
    print(json.dumps({key: float((before[key] - after[key]).abs().max()) for key in before}))
