# Data selection: the pool pairs a language pair's systems train on. `none` keeps the pool, `lium` trains
# on LIUM's released selection, `axelrod` runs our own bilingual cross-entropy difference selection:
# closed vocabulary and LMs from the in-domain text, out-of-domain LMs from a seeded pool sample, sharded
# scoring, then one ranking and cut (data-selection.md §5.4).


rule selection_vocab:
    input:
        paths.tok("{pair}", "indomain", "{lang}"),
    output:
        paths.selection("{pair}", "vocab.{lang}.txt"),
    log:
        paths.log("selection", "{pair}.vocab.{lang}"),
    params:
        min_count=SELECTION["vocab_min_count"],
    shell:
        "rnnmt select-vocab --input {input} --min-count {params.min_count} --output {output} > {log} 2>&1"


rule selection_sample:
    input:
        src=paths.tok("{src}-{tgt}", "pool", "{src}"),
        tgt=paths.tok("{src}-{tgt}", "pool", "{tgt}"),
        indomain=paths.tok("{src}-{tgt}", "indomain", "{tgt}"),
    output:
        src=paths.selection("{src}-{tgt}", "ood.{src}"),
        tgt=paths.selection("{src}-{tgt}", "ood.{tgt}"),
        report=paths.selection("{src}-{tgt}", "ood.json"),
    log:
        paths.log("selection", "{src}-{tgt}.sample"),
    params:
        seed=SELECTION["seed"],
    shell:
        "rnnmt select-sample --src {input.src} --tgt {input.tgt} --indomain-tgt {input.indomain} --seed {params.seed} "
        "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} > {log} 2>&1"


rule selection_lm:
    input:
        text=INPUTS.selection_lm_text,
        vocab=paths.selection("{pair}", "vocab.{lang}.txt"),
    output:
        paths.selection("{pair}", "lm.{domain}.{lang}.npz"),
    log:
        paths.log("selection", "{pair}.lm.{domain}.{lang}"),
    wildcard_constraints:
        domain="in|out",
    params:
        order=SELECTION["order"],
    shell:
        "rnnmt select-lm --input {input.text} --vocab {input.vocab} --order {params.order} --output {output} > {log} 2>&1"


rule selection_index:
    input:
        src=paths.tok("{src}-{tgt}", "pool", "{src}"),
        tgt=paths.tok("{src}-{tgt}", "pool", "{tgt}"),
    output:
        paths.selection("{src}-{tgt}", "index.json"),
    log:
        paths.log("selection", "{src}-{tgt}.index"),
    params:
        shards=SELECTION["shards"],
    shell:
        "rnnmt select-index --src {input.src} --tgt {input.tgt} --shards {params.shards} --output {output} > {log} 2>&1"


rule selection_score:
    input:
        unpack(INPUTS.selection_score),
    output:
        paths.selection("{src}-{tgt}", "scores/{shard}.npz"),
    log:
        paths.log("selection", "{src}-{tgt}.score.{shard}"),
    benchmark:
        paths.benchmark("selection", "{src}-{tgt}.score.{shard}")
    wildcard_constraints:
        shard=r"\d+",
    threads: 1
    params:
        chunk=SELECTION["chunk_lines"],
    shell:
        "rnnmt select-score --src {input.src} --tgt {input.tgt} --index {input.index} --shard {wildcards.shard} "
        "--src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} --lm-in-src {input.lm_in_src} "
        "--lm-out-src {input.lm_out_src} --lm-in-tgt {input.lm_in_tgt} --lm-out-tgt {input.lm_out_tgt} "
        "--chunk-lines {params.chunk} --output {output} > {log} 2>&1"


rule selection_rank:
    input:
        scores=INPUTS.selection_shards,
        pool=paths.corpus("{src}-{tgt}", "pool", "json"),
    output:
        ids=paths.selection("{src}-{tgt}", "selected.npy"),
        report=paths.selection("{src}-{tgt}", "rank.json"),
    log:
        paths.log("selection", "{src}-{tgt}.rank"),
    params:
        flags=INPUTS.selection_cut_flags,
    shell:
        "rnnmt select-rank --scores {input.scores} --pool-report {input.pool} {params.flags} " "--output {output.ids} --report {output.report} > {log} 2>&1"


rule select_data:
    input:
        unpack(INPUTS.select),
    output:
        src=paths.selected("{src}-{tgt}", "train.{src}"),
        tgt=paths.selected("{src}-{tgt}", "train.{tgt}"),
        report=paths.selected("{src}-{tgt}", "report.json"),
    log:
        paths.log("select_data", "{src}-{tgt}"),
    params:
        flags=INPUTS.select_flags,
    shell:
        "rnnmt select {params.flags} --src {input.src} --tgt {input.tgt} "
        "--test-src {input.test_src} --test-tgt {input.test_tgt} --out-src {output.src} --out-tgt {output.tgt} "
        "--report {output.report} > {log} 2>&1"
