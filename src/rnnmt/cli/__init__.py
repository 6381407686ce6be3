"""`rnnmt <command>`: one entry point, one subcommand per pipeline stage.

Each stage module (config, data, text, select, train, decode, evaluate, bench) lists its commands: an argument
builder and a runner that unpacks the arguments into one call of the stage's code and prints its result; a command
with modes (bench) lists one such command per mode.
The stage code is imported inside the runners, so that `rnnmt --help` and tokenizer worker processes,
which import this package again, do not pay for it.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
from collections.abc import Iterable, Sequence

from rnnmt import __version__, environment, reproducible
from rnnmt.cli import bench, config, data, decode, evaluate, select, text, train
from rnnmt.cli.arguments import Command, Modes, positive
from rnnmt.errors import UserError
from rnnmt.train import determinism

COMMANDS: dict[str, Command | Modes] = {c.name: c for stage in (config, data, text, select, train, decode, evaluate, bench) for c in stage.COMMANDS}


class Parser(argparse.ArgumentParser):
    """Refuses an argument it does not know itself, under its own usage: argparse leaves a subcommand's unknown
    arguments to `rnnmt`'s parser, whose usage names none of the subcommand's options."""

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        parsed, unknown = super().parse_known_args(args, namespace)
        if unknown:
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return parsed, unknown


def version() -> str:
    """rnnmt's version, with the torch and Python it runs on: what a bug report needs first."""
    return f"rnnmt {__version__} (torch {importlib.metadata.version('torch')}, Python {platform.python_version()})"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="rnnmt", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=version())
    add_commands(parser, COMMANDS.values(), "command")
    return parser


def add_commands(parser: argparse.ArgumentParser, commands: Iterable[Command | Modes], dest: str) -> None:
    """A parser under `parser` per command (args.<dest> names it), and under a command with modes one per mode (args.mode)."""
    name = dest.upper()
    sub = parser.add_subparsers(dest=dest, required=True, metavar=name, help=f"`{parser.prog} {name} --help` lists its options")
    for c in commands:
        # argparse %-formats help strings (not descriptions): a literal "95%" must reach it as "95%%".
        p = sub.add_parser(c.name, help=c.help.replace("%", "%%"), description=c.help)
        if isinstance(c, Modes):
            add_commands(p, c.modes, "mode")
            continue
        c.add_arguments(p)
        p.add_argument("--threads", type=positive, default=1, help="torch threads / worker processes (default 1)")
        p.set_defaults(run=c.run)


def main(argv: list[str] | None = None) -> int:
    reproducible.apply()  # before any stage imports torch or NumPy
    determinism.prepare_process()  # before anything uses cuBLAS
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv  # `train --processes N` starts itself again under torchrun
    if reproducible.requested() and (differs := environment.mismatch()):
        print(f"rnnmt {args.command}: warning: {differs}", file=sys.stderr)
    from rnnmt.fileio import disk_full_cause

    try:
        if COMMANDS[args.command].torch:
            from rnnmt.runtime import set_threads

            set_threads(args.threads)
            reproducible.install_kernels()  # torch has started now
        args.run(args)
    except UserError as exc:
        print(f"rnnmt {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if (full := disk_full_cause(exc)) is None:
            raise
        # A write outside atomic_path (which names its file itself): say "disk full", not a traceback.
        where = f" while writing {full.filename}" if full.filename else ""
        print(f"rnnmt {args.command}: error: the disk is full ({full.strerror}){where}; free some space and run again.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0
