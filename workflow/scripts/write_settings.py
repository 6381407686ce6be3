"""The `settings` rule's job: write the settings file whose content the workflow resolved (the rule's params).

A script, not a `run:` block: Snakemake runs a `run:` block in a fresh process that parses the whole workflow again
(about 4.5 s a job); a script's process starts in a fraction of a second.
"""

from pathlib import Path

from rnnmt.fileio import write_json

write_json(snakemake.output[0], snakemake.params.content)  # noqa: F821 (Snakemake defines `snakemake` in a script)
Path(snakemake.log[0]).write_text(f"wrote {snakemake.output[0]}\n")  # noqa: F821
