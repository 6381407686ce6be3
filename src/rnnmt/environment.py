"""The installed Python environment against the lock, `constraints.txt`: what provenance.json records and what
reproducible mode warns about.

The lock holds one `name==version` line per package the README's install brings; a line ending in `# test` is
brought only by the `[test]` extra, so its absence does not change a result. scripts/lock.py writes it.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rnnmt.errors import UserError

# Beside pyproject.toml in a checkout (the README installs the checkout, editable).
LOCK = Path(__file__).resolve().parents[2] / "constraints.txt"
TEST_ONLY = "test"  # the comment that marks a line the [test] extra alone brings


@dataclass(frozen=True)
class Pin:
    version: str
    test_only: bool


def normalise(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def public(version: str) -> str:
    """A version without its build label: torch's CPU build 2.13.0+cpu and its CUDA build 2.13.0 are both 2.13.0."""
    return version.split("+", 1)[0]


def read_lock(path: Path) -> dict[str, Pin]:
    pins = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        requirement, _, comment = line.partition("#")
        if not requirement.strip():
            continue
        name, sep, version = requirement.strip().partition("==")
        if not sep or not name or not version:
            raise UserError(f"{path}, line {number}: '{line}' is not a 'name==version' pin.")
        pins[normalise(name)] = Pin(version.strip(), comment.strip() == TEST_ONLY)
    return pins


def installed() -> dict[str, str]:
    """Every distribution Python would import, by normalised name (the first on sys.path where several are)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(normalise(dist.metadata["Name"]), dist.version)
    return dict(sorted(found.items()))


def differences(pins: dict[str, Pin], have: dict[str, str]) -> list[str]:
    """Each locked package installed at another version, or missing though the runtime needs it."""
    out = []
    for name, pin in sorted(pins.items()):
        version = have.get(name)
        if version is None and not pin.test_only:
            out.append(f"{name} not installed (locked {pin.version})")
        elif version is not None and public(version) != public(pin.version):
            out.append(f"{name} {version} (locked {pin.version})")
    return out


def describe(lock: Path | None = None) -> dict[str, Any]:
    """For provenance.json: every installed distribution, and whether the locked ones are at their versions."""
    lock, have = lock or LOCK, installed()
    if not lock.is_file():
        return {"lock": None, "matches": None, "differences": [], "distributions": have}
    found = differences(read_lock(lock), have)
    return {"lock": str(lock), "matches": not found, "differences": found, "distributions": have}


def mismatch(lock: Path | None = None) -> str | None:
    """One line saying how this environment differs from the lock, or None where it matches (or no lock is at hand)."""
    lock = lock or LOCK
    if not lock.is_file():
        return None
    found = differences(read_lock(lock), installed())
    if not found:
        return None
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return f"this environment differs from {lock.name}: {shown}; reproducible mode's digits hold for the locked versions (README, Set-up)."
