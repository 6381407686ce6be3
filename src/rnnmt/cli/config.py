"""`rnnmt show-system`: a system's settings as training and decoding will use them, before a long run."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rnnmt.cli.arguments import Command


def args_show_system(p: argparse.ArgumentParser) -> None:
    p.add_argument("name", help="a system under `systems` in the config")
    p.add_argument("--scale", help="the scale to resolve it at (default: the config's `scale`)")
    p.add_argument(
        "--config",
        type=Path,
        nargs="+",
        default=[Path("config.yaml")],
        metavar="FILE",
        help="config files merged in order, as snakemake --configfile (default ./config.yaml)",
    )
    p.add_argument(
        "--device",
        default="auto",
        choices=["auto", "cpu", "cuda"],
        help="resolve the `auto` training settings for this device (default auto: a GPU if this machine has one)",
    )


def run_show_system(a: argparse.Namespace) -> None:
    from rnnmt import config
    from rnnmt.train.device_choices import describe

    shown = config.show_system(config.load_files(a.config, a.scale), a.name)
    print(json.dumps({**shown, "chosen for the device": describe(shown["train"], a.device)}, indent=2))


COMMANDS = [Command("show-system", "print a system's fully resolved settings at a scale (what training and decoding use)", args_show_system, run_show_system)]
