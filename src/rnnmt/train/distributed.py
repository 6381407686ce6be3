"""Data-parallel training of one system on the GPUs of one node (torchrun + DistributedDataParallel).

Every process builds the same global batch of `train.batch_size` pairs (the stream is a function of the
update number) and takes every world-th row of it. Each process's loss is its share of the global loss,
divided by the global batch's sentences or tokens, times the world size, so that DDP's averaged gradient
is exactly the single-process gradient of the global batch: clipping, learning rate and the update are
the paper's, whatever the number of GPUs. Process 0 validates, logs and writes checkpoints and the model.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from rnnmt.errors import UserError
from rnnmt.train.batching import Batch


@dataclass(frozen=True)
class World:
    """This process's place among the training processes (rank 0 of 1 without torchrun)."""

    rank: int = 0
    size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def parallel(self) -> bool:
        return self.size > 1


def from_environment() -> World:
    """RANK and WORLD_SIZE as torchrun sets them (LOCAL_RANK picks the GPU: runtime.pick_device)."""
    return World(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)))


def launched() -> bool:
    """This process was started by torchrun."""
    return "LOCAL_RANK" in os.environ


def relaunch(processes: int, argv: list[str]) -> None:
    """Replace this process by torchrun running `rnnmt <argv>` in `processes` processes on this node."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes), "-m", "rnnmt.cli", *argv]
    sys.stderr.flush()
    os.execv(sys.executable, command)


def start(world: World, device: torch.device, batch_size: int) -> None:
    """Join the process group: NCCL between GPUs, gloo on the CPU."""
    if not world.parallel:
        return
    if batch_size < world.size:
        raise UserError(f"train.batch_size {batch_size} is smaller than the {world.size} training processes; expected at least one pair each.")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=world.rank, world_size=world.size)


def leave(world: World, code: int) -> None:
    """End this training process with exit status `code`, its outputs written.

    A torchrun process leaves the process group and ends at once, without Python's finalization: gloo's
    worker threads release a collective's tensors some time after the collective completes, and one that
    still holds a tensor whose Python object is gone then needs the GIL, which finalization no longer
    hands out, and the process aborts (SIGABRT, "terminate called without an active exception"); 5 of 110
    two-process runs on a busy 2-core CPU did. destroy_process_group does not join those threads (the DDP
    reducer keeps the group alive)."""
    if not world.parallel:
        if code:
            sys.exit(code)
        return
    if dist.is_initialized():
        dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def shard(batch: Batch, world: World) -> Batch:
    """This process's rows of the global batch."""
    if not world.parallel:
        return batch
    rows = slice(world.rank, None, world.size)
    return Batch(batch.src[rows], batch.src_mask[rows], batch.tgt[rows], batch.tgt_mask[rows], batch.indices[rows])


def sum_over(t: torch.Tensor, world: World) -> torch.Tensor:
    """`t` summed over all processes (every process calls this with a tensor of the same shape)."""
    if world.parallel:
        dist.all_reduce(t)
    return t


def total(value: float, world: World, device: torch.device) -> float:
    """The sum of `value` over all processes."""
    if not world.parallel:
        return value
    return float(sum_over(torch.tensor([float(value)], dtype=torch.float64, device=device), world).item())


def anyone(flag: bool, world: World, device: torch.device) -> bool:
    """True on every process when it is True on one (stop signals, early stopping)."""
    return total(float(flag), world, device) > 0


def barrier(world: World) -> None:
    if world.parallel:
        dist.barrier()
