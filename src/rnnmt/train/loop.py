"""The training loop: updates, learning-rate schedule, held-out cost, early stopping, checkpoints, resume, stop signals."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rnnmt import runtime
from rnnmt.decode.settings import DecodeSettings
from rnnmt.errors import UserError
from rnnmt.models.build import count_parameters
from rnnmt.models.source import SourceFormat
from rnnmt.runtime import format_duration, keep_freed_memory, log
from rnnmt.text.binarize import ParallelData
from rnnmt.text.vocab import Vocab
from rnnmt.train import checkpoint, distributed, setup
from rnnmt.train.batching import Batch, BatchStream
from rnnmt.train.defaults import TRAIN_DEFAULTS
from rnnmt.train.distributed import World
from rnnmt.train.heldout import heldout_bleu, heldout_cost
from rnnmt.train.metrics import MetricsLog
from rnnmt.train.nll import sentence_nll
from rnnmt.train.optim import Clipping, learning_rate
from rnnmt.train.stop import StopFlag

# train.host_memory: whether the process keeps freed host memory for reuse (runtime.keep_freed_memory) or
# lets the C library return it to the kernel (its default).
HOST_MEMORY = {"keep": keep_freed_memory, "release": lambda: False}
# train.valid_metric: what early stopping follows on the first held-out set, as a value where lower is better.
SELECTION = {"perplexity": lambda measured: measured["nll"], "bleu": lambda measured: -measured["bleu"]}


class Step(NamedTuple):
    """What one update returns; the tensors stay on the device, where nothing waits for them."""

    nll: torch.Tensor  # this process's summed NLL
    sentences: int
    tokens: int  # target tokens of the whole batch
    clipping: Clipping  # the gradients' norm before clipping, and whether the rule clipped them


class TrainingInterrupted(Exception):
    """A stop was asked for (signal or time limit); a checkpoint was written and a re-run resumes."""


@dataclass
class TrainState:
    """Everything that changes during training, i.e. what a checkpoint holds besides the weights."""

    update: int = 0
    # Wall time of the training loop, summed over runs, read only where the device has finished its queued
    # work (loop start, log points, stop, loop end): a periodic checkpoint holds the last log point's value.
    wall_time_s: float = 0.0
    best_dev: float = float("inf")  # the best validation's SELECTION value: its NLL, or minus its BLEU
    best_update: int = 0
    bad_validations: int = 0
    train_nll: float | None = None  # NLL/sentence over the last logged window
    stopped: str | None = None  # why training ended ("budget" or "early_stopping"); None while running
    history: list[dict[str, float]] = field(default_factory=list)


def _describe(name: str, measured: dict[str, float]) -> str:
    """One held-out set's validation for the log."""
    bleu = f", BLEU {measured['bleu']:.2f}" if "bleu" in measured else ""
    return f"{name} NLL/sent {measured['nll']:.2f}, ppl {measured['ppl']:.2f}{bleu}"


def _loss_divisor(batch: Batch, kind: str) -> int:
    """'sum': GroundHog's sum of all token NLLs (§1.8); 'sentence_mean': Luong's sum divided by the batch
    size (§4.5); 'token_mean': divided by the target tokens. `batch` is the whole batch."""
    divisor = {"sum": 1, "sentence_mean": len(batch.indices), "token_mean": batch.target_tokens}
    if kind not in divisor:
        raise UserError(f"train.loss is {kind!r}; expected one of {', '.join(divisor)}.")
    return divisor[kind]


def _loss(per_sentence: torch.Tensor, batch: Batch, kind: str) -> torch.Tensor:
    """The loss of `batch` from the NLLs of all or (data-parallel) some of its sentences."""
    return per_sentence.sum() / _loss_divisor(batch, kind)


class Trainer:
    """Trains one system; its checkpoint is out_dir/ckpt/last.pt.

    With early stopping (`patience`), the weights of the best validation so far are kept (on the CPU)
    and written inside the same checkpoint, so that the checkpoint alone restores everything and the
    model published at the end is always the one `best_update` names.

    meta.json's `wall_time_s` is the wall time the training loop ran, resumed runs adding their own, with
    validation and checkpoints included and the device's queued work waited for at every clock point
    (`synchronize`): on a GPU the host enqueues updates far ahead of the device.
    """

    def __init__(
        self,
        system: dict[str, Any],
        train_data: ParallelData,
        valid: dict[str, ParallelData],
        src_vocab: Vocab,
        tgt_vocab: Vocab,
        out_dir: Path,
        device: torch.device,
        data_sha256: dict[str, str],
        world: World = World(),
        stop: StopFlag | None = None,
        tgt_bpe: bool = False,
    ) -> None:
        self.system, self.cfg = system, {**TRAIN_DEFAULTS, **system["train"]}
        self.valid, self.out_dir, self.device, self.world = valid, out_dir, device, world
        self.log = log if world.main else (lambda message: None)
        self.src_vocab, self.tgt_vocab = src_vocab, tgt_vocab
        self.data_sha256 = data_sha256
        if self.cfg["host_memory"] not in HOST_MEMORY:
            raise UserError(f"train.host_memory is {self.cfg['host_memory']!r}; expected one of {', '.join(HOST_MEMORY)}.")
        HOST_MEMORY[self.cfg["host_memory"]]()
        if self.cfg["valid_metric"] not in SELECTION:
            raise UserError(f"train.valid_metric is {self.cfg['valid_metric']!r}; expected one of {', '.join(SELECTION)}.")
        self.valid_decode = DecodeSettings.from_dict(self.cfg["valid_decode"] or {}, "train.valid_decode")
        self.tgt_bpe = tgt_bpe
        self.setup = setup.build(system, self.cfg, (len(src_vocab), len(tgt_vocab)), device, world, self.log)
        self.choices, self.paths, self.model, self.optimizer = self.setup.choices, self.setup.paths, self.setup.model, self.setup.optimizer
        self.static = self.setup.static
        self.source = SourceFormat.of(system["model"])
        self.stream = BatchStream(
            train_data,
            self.cfg["batch_size"],
            self.cfg["sort_k_batches"],
            self.cfg["max_len"],
            system["seed"],
            sort_by=self.cfg["sort_by"],
            shuffle_batches=self.cfg["shuffle_batches"],
            source=self.source,
            pad_to=1 if self.static is None else self.cfg["pad_to"],
        )
        self.budget = self.stream.updates_for(self.cfg["epochs"]) if self.cfg["epochs"] is not None else self.cfg["updates"]
        # The precision `auto` resolved to on this device: a checkpoint resumes only in the precision that wrote it.
        resolved = {**system, "train": {**system["train"], "precision": self.choices["precision"].value}}
        self.fingerprint = checkpoint.fingerprint(resolved, data_sha256)
        self.ckpt_path = out_dir / "ckpt" / "last.pt"
        self.state = TrainState()
        self.best_weights: dict[str, torch.Tensor] | None = None
        self.stop = stop if stop is not None else StopFlag()
        self.metrics = MetricsLog(out_dir, write=world.main)

    def resume(self) -> None:
        """Continue from a matching checkpoint, if any."""
        saved = checkpoint.load_matching(self.ckpt_path, self.fingerprint, self.log)
        if saved is None:
            return
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
        self.state = TrainState(**saved["state"])
        self.best_weights = saved["best_model"]
        self.log(f"resumed from {self.ckpt_path} at update {self.state.update}")

    def save_checkpoint(self) -> None:
        if not self.world.main:
            return
        state = {
            "fingerprint": self.fingerprint,
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": torch.get_rng_state(),
            "state": self.state.__dict__,
            "best_model": self.best_weights,
        }
        checkpoint.save(self.ckpt_path, state)

    def step(self, update: int, batch: Batch | None = None) -> Step:
        """One update (on `batch` if given: the stream's batch of that update, made beforehand)."""
        batch = batch if batch is not None else self.stream.batch(update)
        lr = learning_rate(self.cfg["optimizer"], self.cfg["lr_decay"], int(self.stream.epochs(update)))
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        if self.static is not None:
            per_sentence = self.static(batch.to(self.device), 1 / _loss_divisor(batch, self.cfg["loss"]))
        else:
            autocast_dtype = self.setup.autocast_dtype
            with torch.autocast(self.device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
                per_sentence = sentence_nll(self.setup.objective, distributed.shard(batch, self.world).to(self.device))
            self.optimizer.zero_grad(set_to_none=True)
            (_loss(per_sentence, batch, self.cfg["loss"]) * self.world.size).backward()
        clipping = self.setup.update_step()
        return Step(per_sentence.detach().sum().double(), len(batch.indices), batch.target_tokens, clipping)  # summed as the host would

    def synchronize(self) -> None:
        """Wait until the device has run the work queued so far; every clock point goes through here."""
        runtime.synchronize(self.device)

    def _synced_time(self) -> float:
        """time.perf_counter() once the device has caught up with the host."""
        self.synchronize()
        return time.perf_counter()

    def _clock_point(self, previous: float) -> float:
        """The time of a synced point, with the wall time since the `previous` one added to `wall_time_s`."""
        now = self._synced_time()
        self.state.wall_time_s += now - previous
        return now

    def _log_progress(self, window: dict[str, float], seconds: float) -> None:
        """The progress line of the updates since the previous log point, `seconds` of wall time ago: the
        rate includes whatever ran between the updates (validation, checkpoints), so the ETA is the run's."""
        s, budget = self.state, self.budget
        eta = (budget - s.update) * seconds / window["updates"]
        self.log(
            f"update {s.update}/{budget} | epoch {self.stream.epochs(s.update):.2f} | "
            f"lr {self.optimizer.param_groups[0]['lr']:.4g} | "
            f"NLL/sent {s.train_nll:.2f} | NLL/tok {window['nll'] / window['tokens']:.3f} | "
            f"{window['tokens'] / seconds:,.0f} tgt tok/s | ETA {format_duration(eta)}"
        )

    def validate(self) -> bool:
        """Held-out costs into the log and history; returns True (on every process) when patience has run out."""
        return distributed.anyone(self.world.main and self._validate(), self.world, self.device)

    def _validate(self) -> bool:
        measured = {name: heldout_cost(self.model, data, self.device, self.source, self.paths.output) for name, data in self.valid.items()}
        first = next(iter(measured), None)
        if first is not None and self.cfg["valid_metric"] == "bleu":
            measured[first]["bleu"] = heldout_bleu(self.model, self.valid[first], self.tgt_vocab, self.valid_decode, self.device, self.source, bpe=self.tgt_bpe)
        s = self.state
        s.history.append({"update": s.update, **{name if key == "nll" else f"{name}_{key}": value for name, m in measured.items() for key, value in m.items()}})
        self.metrics.validated(measured)
        self.log(f"validation at update {s.update}: " + ", ".join(_describe(name, m) for name, m in measured.items()))
        if first is None:
            return False
        value = SELECTION[self.cfg["valid_metric"]](measured[first])
        if value < s.best_dev:
            s.best_dev, s.best_update, s.bad_validations = value, s.update, 0
            if self.cfg["patience"] is not None:
                self.best_weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            return False
        s.bad_validations += 1
        patience = self.cfg["patience"]
        return patience is not None and s.bad_validations >= patience

    def run(self) -> dict[str, Any]:
        """Train to the update budget (or early stop) and return the meta data for meta.json."""
        self.stop.install()
        self.resume()
        budget, s = self.budget, self.state
        self.metrics.start(s.update)
        self.log(
            f"training {self.system['name']}: {count_parameters(self.model):,} parameters, "
            f"{self.stream.pairs:,} pairs within max_len={self.cfg['max_len']}, device {self.device}, "
            f"threads {torch.get_num_threads()}, processes {self.world.size}, updates {s.update}->{budget}"
        )
        self.log("; ".join(f"{key} {c.value} ({c.why})" for key, c in self.choices.items()))
        if s.stopped == "early_stopping":
            self.log(f"the checkpoint had already stopped early at update {s.update}")
        window = {"nll": 0.0, "sents": 0, "tokens": 0, "updates": 0}
        # An update may return before the device has run it (train.sync: logging), so the clock is read only
        # where the device has caught up: here, at log points, at a stop and at the end; never per update.
        mark = self._synced_time()
        while s.update < budget and s.stopped != "early_stopping":
            step = self.step(s.update)
            lr = self.optimizer.param_groups[0]["lr"]
            s.update += 1
            self.metrics.add(s.update, self.stream.epochs(s.update), lr, step.nll, step.tokens, step.clipping)
            for key, value in (("nll", step.nll), ("sents", step.sentences), ("tokens", step.tokens), ("updates", 1)):
                window[key] += value
            logged = s.update % self.cfg["log_every"] == 0 or s.update == budget
            if logged:
                # Every process logs at the same updates, so the sum over processes happens here, not per update.
                window["nll"] = distributed.total(float(window["nll"]), self.world, self.device)
                s.train_nll = window["nll"] / window["sents"]
                previous, mark = mark, self._clock_point(mark)
                self._log_progress(window, mark - previous)
                self.metrics.timed(s.wall_time_s, window["tokens"] / (mark - previous))
                window = {"nll": 0.0, "sents": 0, "tokens": 0, "updates": 0}
            validated = s.update % self.cfg["valid_every"] == 0
            if validated and self.validate():
                s.stopped = "early_stopping"
            if distributed.anyone(self.stop.raised, self.world, self.device):
                self._clock_point(mark)
                self._flush_metrics()
                self.save_checkpoint()
                distributed.barrier(self.world)
                raise TrainingInterrupted(
                    f"{self.stop.reason or 'another training process stopped'}; checkpoint at update {s.update} written to {self.ckpt_path}"
                )
            checkpointed = s.update % self.cfg["checkpoint_every"] == 0
            if logged or validated or checkpointed:
                self._flush_metrics()  # before the checkpoint: the file reaches at least its update
            if checkpointed:
                self.save_checkpoint()
        self._clock_point(mark)
        s.stopped = s.stopped or "budget"
        self._flush_metrics()
        self.metrics.close()
        self.save_checkpoint()
        if not self.world.main:
            return {}
        return self.finish()

    def _flush_metrics(self) -> None:
        self.metrics.flush(lambda t: distributed.sum_over(t, self.world))

    def published_update(self) -> int:
        """Put the weights to publish into the model and return their update: the best ones with early stopping."""
        s = self.state
        if self.cfg["patience"] is None:
            return s.update
        if self.best_weights is None:
            if s.best_update:
                # Patience was set after the checkpoint was written: the best weights were not kept then.
                self.log(f"no weights of the best validation (update {s.best_update}) were kept; the model is the last update's")
            return s.update
        self.model.load_state_dict(self.best_weights)
        return s.best_update

    def finish(self) -> dict[str, Any]:
        """Final held-out cost of the weights to publish; with early stopping those of the best validation."""
        model_update = self.published_update()
        measured = {name: heldout_cost(self.model, data, self.device, self.source, self.paths.output) for name, data in self.valid.items()}
        dev = {name: m["nll"] for name, m in measured.items()}
        s = self.state
        meta = {
            "system": self.system["name"],
            "seed": self.system["seed"],
            "updates": s.update,
            "epochs": self.stream.epochs(s.update),
            "wall_time_s": s.wall_time_s,
            "train_nll": s.train_nll,
            "dev_nll": next(iter(dev.values()), None),
            "heldout_nll": dev,
            "heldout_ppl": {name: m["ppl"] for name, m in measured.items()},
            "stopped": s.stopped,
            "best_update": s.best_update,
            "model_update": model_update,
            "history": s.history,
            "parameters": count_parameters(self.model),
            "training_pairs": self.stream.pairs,
            "device": str(self.device),
            # What the `auto` settings became here, the recurrence actually run (a slower one where a faster one could not
            # run a part of the model or failed its check: train/selfcheck.py) and the update step's form (update.py), each
            # with why; and each part's recurrence.
            "settings": {key: choice.value for key, choice in self.choices.items()},
            "recurrence_by_part": self.paths.by_part(),
            "settings_why": {key: choice.why for key, choice in self.choices.items()},
            "threads": torch.get_num_threads(),
            "processes": self.world.size,
            "torch": torch.__version__,
            "fingerprint": self.fingerprint,
            "data_sha256": self.data_sha256,
        }
        return meta
