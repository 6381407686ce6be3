# rnnmt: WMT'14 (or the synthetic demo) -> data -> models -> translations -> the papers' tables and figures.
# Thin entry point: config, schema validation, the stage rule files, and the final targets.
import sys
from pathlib import Path

from snakemake.utils import min_version

from rnnmt.config import read_yaml
from rnnmt.errors import UserError
from rnnmt.train.stop import leave_the_warning_to_training

min_version("9.0")
leave_the_warning_to_training()  # Slurm's early warning is rnnmt train's to act on (docs/cluster.md)

CONFIG_FILE = Path(workflow.basedir) / "config.yaml"
try:
    read_yaml(CONFIG_FILE)  # a syntax error then names the file and line, which Snakemake's message does not
except UserError as exc:
    sys.exit(f"rnnmt: {exc}")


configfile: str(CONFIG_FILE)


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
        PLAN.final_targets(),
