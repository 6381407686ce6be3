# Helpers only: the plan of this run (rnnmt.workflow, tested without Snakemake) and the names rules use.
import os
import sys

from rnnmt import config as rnnmt_config
from rnnmt import gpu_lock, reproducible
from rnnmt.errors import UserError
from rnnmt.workflow import paths, profile
from rnnmt.workflow.inputs import RuleInputs
from rnnmt.workflow.plan import Plan, one_of
from rnnmt.workflow.reports import Reports

try:
    rnnmt_config.type_command_line(config, workflow.config_settings.config)
    PLAN = Plan.load(config, Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml")
except UserError as exc:
    # One line per mistake (all missing files of data.files at once) and a non-zero exit before any job runs, not a traceback.
    sys.exit("\n".join(f"rnnmt: {line}" for line in str(exc).splitlines()))

# Reproducible mode reaches every job (local or sbatch, which exports the environment) through this variable.
if rnnmt_config.reproducible(PLAN.config):
    os.environ[reproducible.SWITCH] = "1"
else:
    os.environ.pop(reproducible.SWITCH, None)

# How many jobs may share a GPU: every job's GPU lock reads it (rnnmt/gpu_lock.py).
os.environ[gpu_lock.JOBS_PER_GPU_ENV] = str(PLAN.config["gpu"]["jobs_per_gpu"])

# A Slurm profile's CHANGE_ME_* values would reach every sbatch line: a run stops before its first job (`onstart`).
# A dry run skips `onstart` and has no executor yet while this file is read, so it warns here, from the -n that
# Snakemake's output settings carry.
PLACEHOLDERS = profile.placeholders(workflow.resource_settings.default_resources, workflow.resource_settings.overwrite_resources)
if PLACEHOLDERS and workflow.output_settings.dryrun:
    print(f"rnnmt: {profile.placeholder_warning(PLACEHOLDERS)}", file=sys.stderr)


onstart:
    if PLACEHOLDERS:
        sys.exit(f"rnnmt: {profile.placeholder_problem(PLACEHOLDERS)}")


INPUTS = RuleInputs(PLAN)
REPORTS = Reports(PLAN)
SCALE = PLAN.scale
SELECTION = SCALE["selection"]
CONSTRAINTS = PLAN.wildcard_constraints()


wildcard_constraints:
    **CONSTRAINTS,


def all_cores(wildcards):
    """Every core the run may use (--cores, or a profile's set-threads): asked when a job starts, so --report needs none."""
    return workflow.cores
