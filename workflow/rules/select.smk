# Data selection: the pool pairs a language pair's systems train on. `none` keeps the pool, `lium` trains
# on LIUM's released selection, `axelrod` runs our own bilingual cross-entropy difference selection:
# closed vocabulary and LMs from the in-domain text, out-of-domain LMs from a seeded pool sample, sharded
# scoring, then one ranking and cut (data-selection.md §5.4).

rule selection_vocab:
    input:
        "results/data/tok/{pair}/indomain.{lang}",
    output:
        "results/data/selection/{pair}/vocab.{lang}.txt",
    params:
        min_count=SELECTION["vocab_min_count"],
    log:
        "results/logs/selection/{pair}.vocab.{lang}.log",
    shell:
        "rnnmt select-vocab --input {input} --min-count {params.min_count} --output {output} > {log} 2>&1"


rule selection_sample:
    input:
        src="results/data/tok/{src}-{tgt}/pool.{src}",
        tgt="results/data/tok/{src}-{tgt}/pool.{tgt}",
        indomain="results/data/tok/{src}-{tgt}/indomain.{tgt}",
    output:
        src="results/data/selection/{src}-{tgt}/ood.{src}",
        tgt="results/data/selection/{src}-{tgt}/ood.{tgt}",
        report="results/data/selection/{src}-{tgt}/ood.json",
    params:
        seed=SELECTION["seed"],
    log:
        "results/logs/selection/{src}-{tgt}.sample.log",
    shell:
        "rnnmt select-sample --src {input.src} --tgt {input.tgt} --indomain-tgt {input.indomain} --seed {params.seed} "
        "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} > {log} 2>&1"


rule selection_lm:
    input:
        text=lambda w: f"results/data/tok/{w.pair}/indomain.{w.lang}" if w.domain == "in" else f"results/data/selection/{w.pair}/ood.{w.lang}",
        vocab="results/data/selection/{pair}/vocab.{lang}.txt",
    output:
        "results/data/selection/{pair}/lm.{domain}.{lang}.npz",
    wildcard_constraints:
        domain="in|out",
    params:
        order=SELECTION["order"],
    log:
        "results/logs/selection/{pair}.lm.{domain}.{lang}.log",
    shell:
        "rnnmt select-lm --input {input.text} --vocab {input.vocab} --order {params.order} --output {output} > {log} 2>&1"


rule selection_index:
    input:
        src="results/data/tok/{src}-{tgt}/pool.{src}",
        tgt="results/data/tok/{src}-{tgt}/pool.{tgt}",
    output:
        "results/data/selection/{src}-{tgt}/index.json",
    params:
        shards=SELECTION["shards"],
    log:
        "results/logs/selection/{src}-{tgt}.index.log",
    shell:
        "rnnmt select-index --src {input.src} --tgt {input.tgt} --shards {params.shards} --output {output} > {log} 2>&1"


rule selection_score:
    input:
        unpack(selection_score_inputs),
    output:
        "results/data/selection/{src}-{tgt}/scores/{shard}.npz",
    wildcard_constraints:
        shard=r"\d+",
    params:
        chunk=SELECTION["chunk_lines"],
    threads: 1
    log:
        "results/logs/selection/{src}-{tgt}.score.{shard}.log",
    benchmark:
        "results/benchmarks/selection/{src}-{tgt}.score.{shard}.tsv"
    shell:
        "rnnmt select-score --src {input.src} --tgt {input.tgt} --index {input.index} --shard {wildcards.shard} "
        "--src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} --lm-in-src {input.lm_in_src} "
        "--lm-out-src {input.lm_out_src} --lm-in-tgt {input.lm_in_tgt} --lm-out-tgt {input.lm_out_tgt} "
        "--chunk-lines {params.chunk} --output {output} > {log} 2>&1"


rule selection_rank:
    input:
        scores=expand("results/data/selection/{{src}}-{{tgt}}/scores/{shard}.npz", shard=range(SELECTION["shards"])),
        pool="results/data/corpus/{src}-{tgt}/pool.json",
    output:
        ids="results/data/selection/{src}-{tgt}/selected.npy",
        report="results/data/selection/{src}-{tgt}/rank.json",
    params:
        flags=selection_cut_flags,
    log:
        "results/logs/selection/{src}-{tgt}.rank.log",
    shell:
        "rnnmt select-rank --scores {input.scores} --pool-report {input.pool} {params.flags} "
        "--output {output.ids} --report {output.report} > {log} 2>&1"


rule select_data:
    input:
        unpack(select_inputs),
    output:
        src="results/data/selected/{src}-{tgt}/train.{src}",
        tgt="results/data/selected/{src}-{tgt}/train.{tgt}",
        report="results/data/selected/{src}-{tgt}/report.json",
    params:
        method=lambda w: rnnmt_config.selection_method(config, f"{w.src}-{w.tgt}"),
        ranking=lambda w, input: f"--ids {input.ids} --rank-report {input.rank}" if "ids" in input.keys() else "",
    log:
        "results/logs/select_data/{src}-{tgt}.log",
    shell:
        "rnnmt select --method {params.method} --src {input.src} --tgt {input.tgt} {params.ranking} "
        "--test-src {input.test_src} --test-tgt {input.test_tgt} --out-src {output.src} --out-tgt {output.tgt} "
        "--report {output.report} > {log} 2>&1"
