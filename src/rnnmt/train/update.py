"""The update after the backward pass: the gradients clipped, then the optimiser's step, and which form runs it.

torch's form (`TorchStep`) is the home: optim.clip_gradients, then the step of the optimiser that
optim.build_optimizer built, whatever a researcher changed there. The `kernels` recurrence's `KernelStep` does both
in one pass per parameter (one Triton kernel each on a GPU, where the two take about eleven) for Adadelta and SGD,
from their `lr`, `rho` and `eps` alone: a second form, which an edit of the optimiser (momentum, weight decay,
another rule) does not reach. So before a run relies on it, `choose` runs three updates of both from the same
gradients on a small float64 model of the run's architecture (one clipped, one not, one whose norm is NaN) and
compares the parameters and the optimiser's state; where they differ, the run takes torch's step, with one log line,
and meta.json says so (`settings.update`; an optimiser with no kernel form takes torch's step without a line, as it
always has). Where the Triton kernels run, the step's stage is also checked against its torch reference on the
device (selfcheck.update_stage_differences).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from rnnmt.models.build import build_model, without_dropout
from rnnmt.recurrence.kernels import stages
from rnnmt.train import kernel_stages, optim, selfcheck
from rnnmt.train.device_choices import Choice

# The optimisers KernelStep has a form of, and the stage that runs each.
KERNEL_FORMS: dict[type[torch.optim.Optimizer], str] = {torch.optim.Adadelta: "adadelta_update", torch.optim.SGD: "sgd_update"}

# The kernel step's parameters and state may differ from torch's by this share of their norms: float64 sums in
# another order differ by ~1e-15; a step that leaves out a momentum or a weight decay, by orders of magnitude more.
STEP_TOLERANCE = 1e-10

# The gradients' norm, as a multiple of clip_norm, in each update the start-of-run check runs: above the threshold,
# below it (a momentum or a bias correction shows only from the second update on), and not finite (GroundHog's 0.1·p).
NORMS_CHECKED = (2.0, 0.5, float("nan"))


def norm_parameters(model: nn.Module, clip_embeddings: bool) -> list[nn.Parameter]:
    """The parameters whose gradients the clipping norm is taken over: all, or (Luong, "for historical reason",
    §4.5) all but the embeddings; every gradient is rescaled either way."""
    return [p for name, p in model.named_parameters() if clip_embeddings or ".embed." not in name]


class TorchStep:
    """The L2 penalty's gradient (train.l2, optim.add_l2_gradient), optim.clip_gradients, then the optimiser's own
    step (the home)."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], norm_params: list[nn.Parameter], max_norm: float, on_device: bool, l2: float = 0.0
    ) -> None:
        self.optimizer, self.params, self.norm_params, self.max_norm, self.on_device = optimizer, params, norm_params, max_norm, on_device
        self.l2, self.l2_params = l2, optim.l2_parameters(params)

    def __call__(self) -> optim.Clipping:
        """Add the penalty's gradient, clip and step; returns the clipping (the gradients' norm before it)."""
        optim.add_l2_gradient(self.l2_params, self.l2)
        clipping = optim.clip_gradients(self.params, self.max_norm, self.norm_params, on_device=self.on_device)
        self.optimizer.step()
        return clipping


class KernelStep:
    """The clipping and an Adadelta or SGD step in one stage per parameter (kernel_stages.py); the optimiser's state
    stays torch's, so that a checkpoint resumes either way. It takes TorchStep's arguments (STEPS builds either);
    `params` and `on_device` are implied: it steps every parameter with a gradient, and clips on the device. It has no
    L2 penalty (`choose` leaves it where train.l2 is set)."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, params: list[nn.Parameter], norm_params: list[nn.Parameter], max_norm: float, on_device: bool, l2: float = 0.0
    ) -> None:
        if type(optimizer) not in KERNEL_FORMS:
            raise ValueError(no_kernel_form(optimizer))
        if l2:
            raise ValueError(NO_KERNEL_L2)
        self.optimizer, self.norm_params, self.max_norm = optimizer, norm_params, max_norm

    def __call__(self) -> optim.Clipping:
        """Clip and step; returns the clipping (the gradients' norm before it)."""
        norm = optim.global_norm([p.grad for p in self.norm_params if p.grad is not None])
        for group in self.optimizer.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._stage(group, p, norm).run()
        return optim.Clipping(norm, self.max_norm)

    def _stage(self, group: dict[str, Any], p: nn.Parameter, norm: Tensor) -> stages.Stage:
        """The stage that clips and steps `p`."""
        clipping = {"param": p.detach(), "grad": p.grad, "norm": norm, "lr": group["lr"], "max_norm": self.max_norm}
        if isinstance(self.optimizer, torch.optim.SGD):
            return kernel_stages.SGDUpdate(**clipping)
        state = self.optimizer.state[p]
        if not state:  # torch.optim.Adadelta's lazy initialisation
            state.update(step=torch.zeros(()), square_avg=torch.zeros_like(p), acc_delta=torch.zeros_like(p))
        state["step"] += 1
        return kernel_stages.AdadeltaUpdate(**clipping, square_avg=state["square_avg"], acc_delta=state["acc_delta"], rho=group["rho"], eps=group["eps"])


Step = Callable[[], optim.Clipping]
STEPS: dict[str, type[TorchStep] | type[KernelStep]] = {"torch": TorchStep, "kernels": KernelStep}


NO_KERNEL_L2 = "train.l2 is set, and the kernel step has no L2 penalty"


def no_kernel_form(optimizer: torch.optim.Optimizer) -> str:
    """Why an optimiser has no kernel step, in words."""
    return f"the optimiser is {type(optimizer).__name__}, and the kernel step has a form of {' and '.join(cls.__name__ for cls in KERNEL_FORMS)} only"


@dataclass
class StepCheck(selfcheck.Comparison):
    """The kernel step beside torch's after the updates of NORMS_CHECKED."""

    tolerance: ClassVar[float] = STEP_TOLERANCE
    home: ClassVar[str] = "torch's step (clip_gradients, then the optimiser build_optimizer built)"


def _state_differences(name: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[tuple[str, float]]:
    """The kernel step's optimiser state of one parameter against torch's, key by key (a key one side lacks differs wholly)."""
    found = []
    for key in sorted(set(ours) | set(theirs)):
        if key not in ours or key not in theirs:
            keeps = "torch's step keeps it, the kernel step does not" if key in theirs else "the kernel step keeps it, torch's step does not"
            found.append((f"the optimiser's state {key!r} of {name} ({keeps})", math.inf))
        elif isinstance(theirs[key], Tensor):
            found.append((f"the optimiser's state {key!r} of {name}", selfcheck.share_of(torch.as_tensor(ours[key]).double(), theirs[key].double(), 1e-300)))
    return found


def step_differences(model_cfg: dict[str, Any], train_cfg: dict[str, Any], vocab: int = 24, seed: int = 0) -> StepCheck:
    """An update for each of NORMS_CHECKED of a small float64 model of `model_cfg`'s architecture by the kernel step
    (its stages' torch references) and by torch's step, both with the optimiser optim.build_optimizer builds from
    `train_cfg`, from the same random gradients scaled to that multiple of the clipping threshold."""
    start = time.perf_counter()
    cfg = without_dropout(selfcheck.small(model_cfg))
    with torch.random.fork_rng(devices=[]), stages.implementation("reference"):
        torch.manual_seed(seed)
        models = [build_model(cfg, vocab, vocab).double() for _ in STEPS]
        models[1].load_state_dict(models[0].state_dict())
        steps, optimizers = [], []
        for model, form in zip(models, STEPS.values()):
            params = list(model.parameters())
            optimizers.append(optim.build_optimizer(params, train_cfg["optimizer"]))
            steps.append(form(optimizers[-1], params, norm_parameters(model, train_cfg["clip_embeddings"]), train_cfg["clip_norm"], False))
        measured = {id(p) for p in norm_parameters(models[0], train_cfg["clip_embeddings"])}
        for scale in NORMS_CHECKED:
            grads = [torch.randn_like(p) for p in models[0].parameters()]
            norm = float(optim.global_norm([g for g, p in zip(grads, models[0].parameters()) if id(p) in measured]))
            for model, step in zip(models, steps):
                for p, g in zip(model.parameters(), grads):
                    p.grad = g * (scale * train_cfg["clip_norm"] / norm)
                step()
    (torch_model, kernel_model), (torch_optimizer, kernel_optimizer) = models, optimizers
    differences = []
    for (name, ours), theirs in zip(kernel_model.named_parameters(), torch_model.parameters()):
        differences.append((f"the parameter {name}", selfcheck.share_of(ours.detach(), theirs.detach(), 1e-300)))
        differences += _state_differences(name, kernel_optimizer.state[ours], torch_optimizer.state[theirs])
    return StepCheck(differences, time.perf_counter() - start)


def _problem(model_cfg: dict[str, Any], train_cfg: dict[str, Any], optimizer: torch.optim.Optimizer, device: torch.device) -> str | None:
    """Why the kernel step cannot stand in for torch's in this run, in words; None where it passes every check."""
    try:
        check = step_differences(model_cfg, train_cfg)
    except Exception as error:  # noqa: BLE001 (an edited optimiser that the kernel step cannot follow: it falls back)
        return selfcheck.failure(error)
    if not check.passed:
        return check.reason()
    if stages.runs_triton(device):
        stage = selfcheck.update_stage_differences(device)[KERNEL_FORMS[type(optimizer)]]
        if not stage.passed:
            return f"its Triton stage failed its check on {device} ({stage.reason()})"
    return None


def choose(
    recurrence: str, model_cfg: dict[str, Any], train_cfg: dict[str, Any], optimizer: torch.optim.Optimizer, device: torch.device
) -> tuple[Choice, str | None]:
    """The form of the update step: the kernel step where the run's recurrence, as its start-of-run check left it
    (device_choices.verified_recurrence), is `kernels` and the step passes its own checks, else torch's; with the log
    line that says why the kernel step was left, if it was."""
    if recurrence != "kernels":
        return Choice("torch", f"the recurrence is {recurrence} (the kernel step comes with kernels)"), None
    if type(optimizer) not in KERNEL_FORMS:
        return Choice("torch", no_kernel_form(optimizer)), None
    if train_cfg["l2"]:
        return Choice("torch", NO_KERNEL_L2), None
    start = time.perf_counter()
    problem = _problem(model_cfg, train_cfg, optimizer, device)
    seconds = f"in {time.perf_counter() - start:.2f} s"
    if problem is None:
        how = f"checked against torch's step over {len(NORMS_CHECKED)} updates" + (f" and its Triton stage on {device}" if stages.runs_triton(device) else "")
        return Choice("kernels", f"the recurrence's: one stage per parameter; {how} {seconds}"), None
    return Choice("torch", f"kernels left behind: {problem}; checked {seconds}"), f"update kernels: {problem}; this run updates with torch's step"
