# One training job per system. Checkpoints live in results/models/{system}/ckpt/, deliberately not
# declared as outputs, so that a failed or pre-empted job keeps them and resumes when run again.


localrules:
    system_config,


rule system_config:
    output:
        "results/config/{system}.json",
    params:
        system=lambda w: json.dumps(rnnmt_config.system_config(config, w.system), sort_keys=True),
    log:
        "results/logs/system_config/{system}.log",
    run:
        write_json(output[0], json.loads(params.system))
        Path(log[0]).write_text(f"wrote {output[0]}\n")


rule train:
    input:
        unpack(train_inputs),
    output:
        model="results/models/{system}/model.pt",
        meta="results/models/{system}/meta.json",
    params:
        bpe=lambda w, input: bpe_flags(input),
        heldout=heldout_flags,
    # Start every training before any translation, so that no core idles at the end of the run.
    priority: 10
    threads: 1
    # GPUs of one training job (profiles set it); more than one trains data-parallel, one process per GPU.
    resources:
        gpu=0,
    log:
        "results/logs/train/{system}.log",
    benchmark:
        "results/benchmarks/train/{system}.tsv"
    shell:
        "rnnmt train --system {input.system} --train {input.train} {params.heldout} "
        "--src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} {params.bpe} "
        "--out-dir results/models/{wildcards.system} --processes {resources.gpu} --threads {threads} > {log} 2>&1"
