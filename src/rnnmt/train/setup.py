"""What a run trains with, made once from the system's settings and the checks: `Setup`.

The settings a device decides (device_choices.py) are settled first; then the recurrence each part of the model runs
by, checked against autograd through the modules (selfcheck.py); the model built with those loops; its objective (the
NLL per sentence, data-parallel where several processes train); the optimiser optim.build_optimizer builds and the
form of its step, checked against it (update.py); and, with `train.graph`, the update at static shapes (graphs.py).
The Trainer (loop.py) runs a Setup; `rnnmt bench` reads it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from rnnmt.errors import UserError
from rnnmt.models.build import Seq2Seq, build_model
from rnnmt.models.loops import Paths
from rnnmt.models.source import round_up
from rnnmt.recurrence import forms
from rnnmt.train import determinism, device_choices, distributed, optim, update
from rnnmt.train.device_choices import Choice
from rnnmt.train.distributed import World
from rnnmt.train.graphs import StaticUpdate
from rnnmt.train.nll import SentenceNLL, Workspace

# train.precision (as device_choices resolves it): the dtype matrix products run in during training
# (autocast); weights, optimiser state, softmax, loss and gradient clipping stay float32 either way.
AUTOCAST = {"float32": None, "bfloat16": torch.bfloat16}


@dataclass
class Setup:
    """A run's checked choices (each with why), the recurrence of each part of its model, the model, its objective,
    the optimiser and the form of its step, and the update at static shapes where `train.graph` asks for one."""

    choices: dict[str, Choice]
    paths: Paths
    model: Seq2Seq
    objective: nn.Module  # SentenceNLL, or its DistributedDataParallel wrapper
    optimizer: torch.optim.Optimizer
    update_step: update.Step
    static: StaticUpdate | None
    autocast_dtype: torch.dtype | None

    @property
    def workspace(self) -> Workspace | None:
        """The objective's softmax buffer (None where the output layer runs as `plain`)."""
        objective = self.objective.module if isinstance(self.objective, DistributedDataParallel) else self.objective
        return objective.workspace

    def captured_shapes(self) -> int:
        """The padded shapes `train.graph: cuda` has captured so far."""
        return len(self.static.graphs) if self.static is not None else 0


def build(system: dict[str, Any], cfg: dict[str, Any], vocab_sizes: tuple[int, int], device: torch.device, world: World, log: Callable[[str], None]) -> Setup:
    """The Setup of `system` (its train settings `cfg`, defaults filled in) for source and target vocabularies of
    `vocab_sizes` on `device`, in `world`; each fast form left behind is said in one `log` line."""
    choices = device_choices.choose(cfg, device, world.size)
    determinism.apply(choices["deterministic"].value == "on", device)
    choices["recurrence"], paths, failure = device_choices.verified_recurrence(choices["recurrence"], system["model"], device, choices["precision"].value)
    if failure:
        log(failure)
    # Updates at static shapes never run torch's LSTM over packed sequences, whose lengths the host reads (graphs.py).
    loops = forms.part_loops(paths, packed=choices["graph"].value == "none")
    torch.manual_seed(system["seed"])
    model = build_model(system["model"], *vocab_sizes, loops).to(device)
    params = list(model.parameters())
    distributed.start(world, device, cfg["batch_size"])
    # DDP averages the processes' gradients during backward (see distributed.py for the loss scaling).
    objective = SentenceNLL(model, paths.output)
    optimizer = optim.build_optimizer(params, cfg["optimizer"])
    choices["update"], failure = update.choose(choices["recurrence"].value, system["model"], cfg, optimizer, device)
    if failure:
        log(failure)
    # sync logging: gradient clipping decides on the device, and the host reads it only at log points.
    on_device = choices["sync"].value == "logging"
    step = update.STEPS[choices["update"].value](
        optimizer, params, update.norm_parameters(model, cfg["clip_embeddings"]), cfg["clip_norm"], on_device, cfg["l2"]
    )
    autocast_dtype = AUTOCAST[choices["precision"].value]
    static = _static_update(choices["graph"].value, cfg, objective, params, autocast_dtype, vocab_sizes[1], device, world)
    return Setup(choices, paths, model, DistributedDataParallel(objective) if world.parallel else objective, optimizer, step, static, autocast_dtype)


def _static_update(
    graph: str,
    cfg: dict[str, Any],
    objective: SentenceNLL,
    params: list[nn.Parameter],
    autocast_dtype: torch.dtype | None,
    tgt_vocab: int,
    device: torch.device,
    world: World,
) -> StaticUpdate | None:
    """train.graph's update at static shapes (graphs.py), or None for the default."""
    if graph == "none":
        return None
    if world.parallel:
        raise UserError(f"train.graph is {graph!r}, but training runs in {world.size} processes; expected graph: none for data-parallel training.")
    if graph == "cuda":
        if device.type != "cuda":
            raise UserError(f"train.graph is 'cuda', but training runs on {device}; expected a CUDA device (or graph: static or none).")
        if cfg["max_len"] is None:
            raise UserError("train.graph is 'cuda', but train.max_len is not set; expected a maximum length, which bounds the shapes to capture.")
        # Every captured graph reads and writes the softmax buffer at one address: allocated for the widest batch.
        width = round_up(cfg["max_len"] + 1, cfg["pad_to"])
        if objective.workspace is not None:  # the plain recurrence's NLL keeps no workspace
            objective.workspace.reserve(cfg["batch_size"] * width, tgt_vocab, autocast_dtype or torch.float32, device)
    return StaticUpdate(objective, params, autocast_dtype, capture=graph == "cuda")
