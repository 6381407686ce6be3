"""Train a tiny RNNsearch and a tiny Luong system for 30 float32 updates on one CPU thread and print a hash of
their parameters, with rnnmt's reproducible mode applied first as the command line applies it
(test_reproducible.py runs this under different instruction-set caps)."""

from __future__ import annotations

from rnnmt import reproducible

reproducible.apply()  # before torch starts: the libraries read their caps once

import hashlib  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

reproducible.install_kernels()  # as the command line does once torch has started

import conftest  # noqa: E402
from test_graphs import make_trainer  # noqa: E402


def parameters_hash(names: list[str]) -> str:
    torch.set_num_threads(1)
    tmp = Path(tempfile.mkdtemp())
    corpus = conftest.tiny_corpus._fixture_function(tmp)
    digest = hashlib.sha256()
    for name in names:
        trainer = make_trainer(corpus, tmp / name, name)
        for update in range(30):
            trainer.step(update)
        for p in trainer.model.parameters():
            digest.update(p.detach().numpy().tobytes())
    return digest.hexdigest()


if __name__ == "__main__":
    print(parameters_hash(sys.argv[1:]))
