# rnnmt: WMT'14 (or the synthetic demo) -> data -> models -> translations -> the papers' tables and figures.
# Thin entry point: config, schema validation, the stage rule files, and the final targets.
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")


configfile: str(Path(workflow.basedir) / "config.yaml")


report: "workflow/report/workflow.rst"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/preprocess.smk"
include: "workflow/rules/select.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/report.smk"


rule all:
    default_target: True
    input:
        final_targets(),
