# Settings files, then one training job per system. Checkpoints live in results/models/{system}/ckpt/,
# deliberately not declared as outputs, so that a failed or pre-empted job keeps them and resumes when run again.


localrules:
    settings,


# What a command reads, resolved from config.yaml: SYSTEM (training), decode/SYSTEM, tables/TABLE, claims,
# coverage, provenance. Each file holds only what its reader uses, so a new label does not retrain a model.
rule settings:
    output:
        paths.settings(),
    log:
        paths.log("settings", "{name}"),
    wildcard_constraints:
        name=one_of(REPORTS.settings_names()),
    params:
        content=REPORTS.settings,
    script:
        "../scripts/write_settings.py"


rule train:
    input:
        unpack(INPUTS.train),
    output:
        model=paths.model(),
        meta=paths.model(name="meta.json"),
    log:
        paths.log("train", "{system}"),
    benchmark:
        paths.benchmark("train", "{system}")
    # Start every training before any translation, so that no core idles at the end of the run.
    priority: 10
    threads: 1
    # GPUs of one training job (profiles set it); more than one trains data-parallel, one process per GPU.
    resources:
        gpu=0,
    params:
        flags=INPUTS.train_flags,
        out_dir=paths.model(name=""),
    shell:
        "rnnmt train --system {input.system} --train {input.train} {params.flags} "
        "--src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} "
        "--out-dir {params.out_dir} --processes {resources.gpu} --threads {threads} > {log} 2>&1"
