#!/usr/bin/env bash
# Snakemake itself as a Slurm job, where login nodes end long processes (docs/cluster.md, "Snakemake as a job").
# From the project folder, once the profile is filled in:
#   sbatch --account=ACCOUNT --partition=PARTITION scripts/slurm_snakemake.sh --config scale=paper
# Its arguments go to snakemake. The job only plans and submits (each rule still runs as a Slurm job of its own),
# so it asks for one CPU and little memory, and for as long as the whole run may take: pass --time=... to sbatch
# where the partition allows less. When the job ends, Snakemake cancels the jobs it submitted; submitting this
# script again resumes the run (finished outputs kept, training from its checkpoints).
#SBATCH --job-name=rnnmt-snakemake
#SBATCH --cpus-per-task=1
#SBATCH --mem=4G
#SBATCH --time=7-00:00:00
#SBATCH --output=rnnmt-snakemake-%j.log
set -euo pipefail
# Slurm runs a copy of this script from its spool folder: the project is where sbatch was called.
cd "${SLURM_SUBMIT_DIR:-$(dirname "$0")/..}"
profile=${RNNMT_PROFILE:-workflow/profiles/slurm}
if [ ! -f "$profile/config.yaml" ]; then
    echo "rnnmt: no Snakemake profile at $PWD/$profile/config.yaml; submit from the project folder, or set RNNMT_PROFILE to your copy of workflow/profiles/slurm." >&2
    exit 2
fi
echo "rnnmt: Snakemake as Slurm job ${SLURM_JOB_ID:-(not in a job)} in $PWD with the profile $profile"
exec snakemake --workflow-profile "$profile" "$@"
