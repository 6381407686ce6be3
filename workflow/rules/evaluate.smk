# The No-UNK subset (once per pair, so once per table), beam-search translation, BLEU.


rule nounk_subset:
    input:
        unpack(nounk_inputs),
    output:
        "results/data/nounk/{src}-{tgt}/test.ids",
    params:
        bpe=lambda w, input: bpe_flags(input),
    log:
        "results/logs/nounk_subset/{src}-{tgt}.log",
    shell:
        "rnnmt nounk-subset --src {input.src} --ref {input.ref} --src-vocab {input.src_vocab} "
        "--tgt-vocab {input.tgt_vocab} {params.bpe} --output {output} > {log} 2>&1"


rule translate:
    input:
        unpack(translate_inputs),
    output:
        "results/translations/{system}/test.{subset}.txt",
    params:
        beam=config["evaluation"]["beam"],
        batch=PRESET["evaluation"]["batch_size"],
        flags=translate_flags,
    threads: 1
    log:
        "results/logs/translate/{system}.{subset}.log",
    benchmark:
        "results/benchmarks/translate/{system}.{subset}.tsv"
    shell:
        "rnnmt translate --model {input.model} --input {input.src} --output {output} --beam {params.beam} "
        "--batch-size {params.batch} {params.flags} --threads {threads} > {log} 2>&1"


rule score:
    input:
        unpack(score_inputs),
    output:
        "results/scores/{system}.json",
    params:
        lang=lambda w: tgt_lang(w.system),
        threshold=config["evaluation"]["long_threshold"],
        fig=LENGTH_CURVE,
    log:
        "results/logs/score/{system}.log",
    shell:
        "rnnmt score --hyps {input.hyps} --hyps-nounk {input.hyps_nounk} --nounk-ids {input.ids} "
        "--refs-tok {input.refs_tok} --refs-raw {input.refs_raw} --src-tok {input.src_tok} --lang {params.lang} "
        "--window {params.fig[window]} --max-length {params.fig[max_length]} --length-by {params.fig[length_by]} "
        "--threshold {params.threshold} --output {output} > {log} 2>&1"
