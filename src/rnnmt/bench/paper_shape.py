"""A system at its paper sizes without its data: its settings at the `paper` scale of config.yaml and random pairs
with the papers' lengths (config `bench`), for the modes that time a paper system without its corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from rnnmt.errors import UserError


def synthetic_data(lengths: dict[str, float], pairs: int, src_vocab: int, tgt_vocab: int, max_len: int | None, seed: int) -> Any:
    """Random pairs whose lengths are correlated log-normals (config `bench.lengths`), cut to 1..max_len."""
    from rnnmt.text.binarize import ParallelData
    from rnnmt.text.vocab import Vocab

    g = torch.Generator().manual_seed(seed)
    z_src = torch.randn(pairs, generator=g, dtype=torch.float64)
    r = lengths["correlation"]
    z_tgt = r * z_src + (1 - r**2) ** 0.5 * torch.randn(pairs, generator=g, dtype=torch.float64)
    first = len(Vocab.SPECIALS)
    sides = []
    for z, median, vocab in ((z_src, lengths["src_median"], src_vocab), (z_tgt, lengths["tgt_median"], tgt_vocab)):
        n = (median * torch.exp(lengths["sigma"] * z)).round().clamp(1, max_len or float("inf")).long()
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), n.cumsum(0)])
        sides += [torch.randint(first, vocab, (int(offsets[-1]),), generator=g), offsets]
    return ParallelData(*sides, {"synthetic": True, "src_vocab_size": src_vocab, "tgt_vocab_size": tgt_vocab})


def paper_system(config_path: Path, name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The validated config and system `name`'s training settings at the `paper` scale."""
    from rnnmt import config as rnnmt_config

    config = rnnmt_config.load(config_path, rnnmt_config.schema_beside(config_path))
    if name not in config["systems"]:
        raise UserError(f"--paper-shape {name}: {config_path} has no such system (known: {', '.join(config['systems'])}).")
    if "bench" not in config:
        raise UserError(f"--paper-shape needs the 'bench' section of config.yaml; {config_path} has none.")
    config["scale"] = "paper"
    return config, rnnmt_config.training_settings(config, name)


def _paper_shape(config_path: Path, name: str, pairs: int | None = None) -> dict[str, Any]:
    """System `name` at the `paper` scale, with random data of its vocabulary sizes (`pairs` pairs; default config's
    `bench.synthetic_pairs`, `bench.paper_pairs` of its pair when `pairs` is 0) and its update budget."""
    from rnnmt.text.vocab import Vocab
    from rnnmt.train.batching import updates_for_epochs

    config, system = paper_system(config_path, name)
    vocab = config["scales"]["paper"]["vocab"]
    size = vocab.get("pair_sizes", {}).get(system["pair"], vocab["size"])
    train = system["train"]
    if pairs == 0:
        pairs = config["bench"]["paper_pairs"].get(system["pair"])
        if pairs is None:
            raise UserError(f"{config_path}: bench.paper_pairs has no '{system['pair']}', the pair of {name}; give --pairs.")
    data = synthetic_data(
        config["bench"]["lengths"],
        pairs or config["bench"]["synthetic_pairs"],
        size + len(Vocab.SPECIALS),
        size + len(Vocab.SPECIALS),
        train.get("max_len"),
        system["seed"],
    )
    words = [f"w{i}" for i in range(size)]
    budget = train.get("updates")
    if train.get("epochs") is not None:
        pairs = config["bench"]["paper_pairs"].get(system["pair"])
        if pairs is None:
            raise UserError(f"--paper-shape {name}: its budget is in epochs, but bench.paper_pairs in {config_path} has no '{system['pair']}'.")
        budget = updates_for_epochs(train["epochs"], pairs, train["batch_size"])
    return {"system": system, "data": data, "vocab": Vocab(words, [1] * size), "budget": budget, "lengths": config["bench"]["lengths"]}
