"""What a Snakemake profile must not keep as shipped: the Slurm profile's `CHANGE_ME_*` placeholders
(workflow/profiles/slurm/config.yaml). A run that would submit jobs with one stops before it starts, and a dry run
warns (common.smk)."""

from __future__ import annotations

from collections.abc import Mapping

PLACEHOLDER = "CHANGE_ME"


def _raw(value: object) -> str:
    """A resource's setting as written (Snakemake keeps it as `raw` on its Resource objects)."""
    return str(getattr(value, "raw", value))


def placeholders(default_resources: Mapping[str, object] | None, set_resources: Mapping[str, Mapping[str, object]] | None) -> list[str]:
    """The profile's resource settings that still hold a placeholder, named as the profile names them."""
    found = [f"default-resources: {name}" for name, value in (default_resources or {}).items() if PLACEHOLDER in _raw(value)]
    for rule, resources in (set_resources or {}).items():
        found += [f"set-resources: {rule}: {name}" for name, value in resources.items() if PLACEHOLDER in _raw(value)]
    return found


def _unfilled(found: list[str]) -> str:
    return f"the Snakemake profile still holds {PLACEHOLDER}_* values ({'; '.join(found)}): set them for your cluster in the profile (docs/cluster.md)"


def placeholder_problem(found: list[str]) -> str:
    """One sentence for a run whose profile keeps placeholders."""
    return f"{_unfilled(found)}."


def placeholder_warning(found: list[str]) -> str:
    """One sentence for a dry run (what a user runs first) whose profile keeps placeholders: the run itself would stop."""
    return f"warning: {_unfilled(found)}; until then a run stops before its first job."
