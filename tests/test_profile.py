"""The Slurm profile's placeholders found in the forms Snakemake hands them over (rnnmt/workflow/profile.py)."""

from __future__ import annotations

import pytest

from rnnmt.workflow import profile


def test_placeholders_are_named_as_the_profile_names_them():
    found = profile.placeholders(
        {"slurm_account": "CHANGE_ME_ACCOUNT", "runtime": "2h", "mem_mb": 8000},
        {"train": {"slurm_partition": "CHANGE_ME_GPU_PARTITION", "gpu": 1}, "binarize": {"mem_mb": 1000}},
    )
    assert found == ["default-resources: slurm_account", "set-resources: train: slurm_partition"]
    assert profile.placeholders({"slurm_account": "lab42"}, None) == [] and profile.placeholders(None, None) == []


def test_placeholders_are_found_in_snakemakes_parsed_resources():
    resources = pytest.importorskip("snakemake.resources", reason="Snakemake is in the project's dependencies")
    parsed = resources.Resources.parse(["slurm_account=CHANGE_ME_ACCOUNT", "mem_mb=8000"], allow_expressions=True, defaults="bare")
    assert profile.placeholders(parsed, {}) == ["default-resources: slurm_account"]
