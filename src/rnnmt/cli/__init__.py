"""`rnnmt <command>`: one entry point, one subcommand per pipeline stage.

Each stage module (config, data, text, select, train, decode, evaluate, bench) lists its commands: an argument
builder and a runner that unpacks the arguments into one call of the stage's code and prints its result.
The stage code is imported inside the runners, so that `rnnmt --help` and tokenizer worker processes,
which import this package again, do not pay for it.
"""

from __future__ import annotations

import argparse
import sys

from rnnmt import environment, reproducible
from rnnmt.cli import bench, config, data, decode, evaluate, select, text, train
from rnnmt.cli.arguments import Command, positive
from rnnmt.errors import UserError
from rnnmt.train import determinism

COMMANDS: dict[str, Command] = {c.name: c for stage in (config, data, text, select, train, decode, evaluate, bench) for c in stage.COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rnnmt", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for c in COMMANDS.values():
        # argparse %-formats help strings (not descriptions): a literal "95%" must reach it as "95%%".
        p = sub.add_parser(c.name, help=c.help.replace("%", "%%"), description=c.help)
        c.add_arguments(p)
        p.add_argument("--threads", type=positive, default=1, help="torch threads / worker processes (default 1)")
        p.set_defaults(run=c.run)
    return parser


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
