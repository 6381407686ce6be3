"""Regenerate constraints.txt, the lock: the exact version of every package the README's install brings.

    python3 scripts/lock.py [PIP OPTIONS]        # from the repository root, with the Python CI uses

pip resolves `torch==TORCH` and `-e ".[test]"` without installing anything (`--dry-run --report`), once with the
extra and once without, to mark what only `[test]` brings. The resolve must find torch's CPU build: pip finds it
through its configuration or the options given, e.g. `--extra-index-url https://download.pytorch.org/whl/cpu`.
The versions torch's CUDA build on PyPI pins (triton) are read from its metadata and imposed, so that the same
file serves a GPU machine, where pip takes that build instead.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from rnnmt.environment import TEST_ONLY, normalise, public  # noqa: E402

TORCH = "2.13.0"
HEADER = f"""\
# The lock: the exact version of every package `pip install -e ".[test]"` brings (CPython 3.11, Linux x86-64),
# used as pip constraints by the README's set-up and .ci/run. Regenerate with `python3 scripts/lock.py`.
# torch is pinned without its build label, so that its CPU build ({TORCH}+cpu) and PyPI's CUDA build ({TORCH})
# both meet it; triton is the version the CUDA build pins. "# {TEST_ONLY}": brought only by the [test] extra.
"""


def resolve(requirements: list[str], pip_options: list[str], env: dict[str, str] | None = None) -> list[dict]:
    """What `pip install` would install for `requirements` in an empty environment (pip's installation report)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", str(report)]
        subprocess.run([*command, *pip_options, *requirements], check=True, cwd=ROOT, env=env)
        return json.loads(report.read_text())["install"]


def versions(items: list[dict]) -> dict[str, str]:
    return {normalise(item["metadata"]["name"]): item["metadata"]["version"] for item in items}


def cuda_build_pins() -> list[str]:
    """The exact pins of PyPI's torch build for Linux x86-64 (its CUDA build) on packages the CPU install also brings."""
    # Without the machine's pip configuration: a local CPU wheel must not stand in for PyPI's build.
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": "", "PIP_CONSTRAINT": ""}
    with tempfile.TemporaryDirectory() as target:
        where = ["--no-deps", "--only-binary=:all:", "--platform", "manylinux_2_28_x86_64", "--python-version", "3.11", "--target", target]
        (torch,) = resolve([f"torch=={TORCH}"], where, env)
    pins = []
    for requirement in torch["metadata"].get("requires_dist", []):
        spec = requirement.split(";", 1)[0].replace(" ", "")
        name, sep, version = spec.partition("==")
        if sep and normalise(name) == "triton":
            pins.append(f"{name}=={version}")
    return pins


def main(pip_options: list[str]) -> None:
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as cuda:
        cuda.write("\n".join(cuda_build_pins()) + "\n")
        cuda.flush()
        options = [*pip_options, "-c", cuda.name]
        runtime = versions(resolve([f"torch=={TORCH}", "-e", "."], options))
        full = versions(resolve([f"torch=={TORCH}", "-e", ".[test]"], options))
    if not full["torch"].endswith("+cpu"):
        sys.exit(
            f"lock.py: pip resolved torch {full['torch']}, not the CPU build; give it an index that has it, e.g. --extra-index-url https://download.pytorch.org/whl/cpu"
        )
    full.pop("rnnmt")
    lines = [
        f"{name}=={public(version) if name == 'torch' else version}" + ("" if name in runtime else f"  # {TEST_ONLY}") for name, version in sorted(full.items())
    ]
    (ROOT / "constraints.txt").write_text(HEADER + "\n".join(lines) + "\n", encoding="utf-8")
    print(f"constraints.txt: {len(lines)} packages, {sum(name not in runtime for name in full)} of them for [test] only")


if __name__ == "__main__":
    main(sys.argv[1:])
