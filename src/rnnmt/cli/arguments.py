"""Argument types and argument groups shared by the stage modules, and the record of one subcommand."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rnnmt.decode.settings import ENSEMBLE_AVERAGES, DecodeSettings
from rnnmt.gpu_lock import DEFAULT_LOCK_DIR, LOCK_DIR_ENV

DEFAULT = DecodeSettings()
DECODE_FIELDS = [field.name for field in dataclasses.fields(DecodeSettings)]


@dataclass(frozen=True)
class Command:
    """One `rnnmt` subcommand: its name, one-line help, argument builder and runner; `torch`: whether it computes with
    torch, which then starts before it runs, with its thread count and, in reproducible mode, the pinned kernels. A
    command without it never starts torch (tests/test_cli.py checks), which saves a job about 2.6 s."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]
    torch: bool = True


@dataclass(frozen=True)
class Modes:
    """An `rnnmt` subcommand whose first argument names its mode (`rnnmt bench MODE`, args.mode): one Command per mode,
    so that each mode's help lists its own options and the parser refuses another mode's; `torch` as in Command."""

    name: str
    help: str
    modes: list[Command]
    torch: bool = True


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def seed(text: str) -> int:
    """An argparse type: a random seed, 0 to 2^32 - 1 (what numpy's generators take)."""
    value = int(text)
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"expected a seed from 0 to {2**32 - 1}, got {text}")
    return value


def ratio(text: str) -> float:
    """An argparse type: a number above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {text}")
    return value


def key_value(text: str) -> tuple[str, str]:
    """Parse NAME=VALUE arguments."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    return name, value


def add_vocab_arguments(p: argparse.ArgumentParser) -> None:
    """The two vocabularies of a language pair, and their BPE codes when the vocabulary is BPE."""
    p.add_argument("--src-vocab", type=Path, required=True)
    p.add_argument("--tgt-vocab", type=Path, required=True)
    p.add_argument("--src-bpe", type=Path, help="BPE codes of the source side (vocab.kind: bpe)")
    p.add_argument("--tgt-bpe", type=Path, help="BPE codes of the target side")


def load_vocabs(a: argparse.Namespace) -> tuple:
    """(source vocab, target vocab, source BPE segmenter or None, target BPE segmenter or None)."""
    from rnnmt.text.bpe import BpeSegmenter
    from rnnmt.text.vocab import Vocab

    return (Vocab.load(a.src_vocab), Vocab.load(a.tgt_vocab), *(BpeSegmenter(p) if p else None for p in (a.src_bpe, a.tgt_bpe)))


def add_device_arguments(p: argparse.ArgumentParser) -> None:
    """Where a model runs; a GPU is claimed with a machine-wide lock so that parallel jobs never share one."""
    p.add_argument("--device", default="auto", help="auto (a free GPU, else the CPU), cpu, cuda (any free GPU) or cuda:N")
    p.add_argument("--gpu-lock-dir", type=Path, help=f"machine-wide GPU lock directory (default: ${LOCK_DIR_ENV}, else {DEFAULT_LOCK_DIR})")


# The flags are named after DecodeSettings' fields (dest) and default to None, "not given": the values
# then come from --decode FILE, else from DecodeSettings, so that its defaults are written once.
def add_beam_arguments(p: argparse.ArgumentParser) -> None:
    """Beam-search settings: GroundHog's by default, Luong's with --constant-beam --max-ratio 1.5 --stack 100."""
    p.add_argument(
        "--decode",
        type=Path,
        metavar="FILE",
        help=f"decoding settings: a JSON object with any of {', '.join(DECODE_FIELDS)}; the flags below override its values",
    )
    p.add_argument("--beam", type=positive, help=f"beam width (default {DEFAULT.beam})")
    p.add_argument("--normalize", action="store_true", default=None, help="rank by log-probability per word")
    p.add_argument(
        "--constant-beam",
        dest="shrink",
        action="store_false",
        default=None,
        help="keep the beam width as hypotheses finish (Luong) instead of shrinking it (GroundHog)",
    )
    p.add_argument(
        "--min-ratio", type=float, help=f"EOS only after this many words per source word, its EOS counted (|x| = n + 1; default {DEFAULT.min_ratio})"
    )
    p.add_argument("--max-ratio", type=ratio, help=f"at most this many steps per source word, its EOS counted (default {DEFAULT.max_ratio})")
    p.add_argument("--stack", type=positive, help="--constant-beam: stop after this many finished hypotheses (default: beam)")


def add_ensemble_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--ensemble-average",
        dest="ensemble",
        choices=ENSEMBLE_AVERAGES,
        help=f"several models: average their softmax inputs (logits, as nmt.matlab) or their log-probabilities (default {DEFAULT.ensemble})",
    )


def decode_settings(a: argparse.Namespace) -> DecodeSettings:
    """The settings of --decode FILE (or the defaults), overridden by the flags given (commands without
    --ensemble-average decode with one model)."""
    return DecodeSettings.read(a.decode, **{name: getattr(a, name, None) for name in DECODE_FIELDS})
