# The No-UNK subset (once per pair, so once per table), beam-search translation (one model or an
# ensemble), UNK replacement with a dictionary learned from the training data (Luong), BLEU. Each runs on a
# test split: `test` (a pair's first test set) or `test-CORPUS` (another that a table names; common.smk).


rule nounk_subset:
    input:
        unpack(nounk_inputs),
    output:
        "results/data/nounk/{src}-{tgt}/{split}.ids",
    wildcard_constraints:
        split=TEST_SPLITS,
    params:
        bpe=lambda w, input: bpe_flags(input),
    log:
        "results/logs/nounk_subset/{src}-{tgt}.{split}.log",
    shell:
        "rnnmt nounk-subset --src {input.src} --ref {input.ref} --src-vocab {input.src_vocab} "
        "--tgt-vocab {input.tgt_vocab} {params.bpe} --output {output} > {log} 2>&1"


rule translate:
    input:
        unpack(translate_inputs),
    output:
        text="results/translations/{system}/{split}.{subset}.txt",
        align="results/translations/{system}/{split}.{subset}.align",
    wildcard_constraints:
        split=TEST_SPLITS,
        subset="all|nounk",
    params:
        batch=PRESET["evaluation"]["batch_size"],
        flags=translate_flags,
    threads: 1
    log:
        "results/logs/translate/{system}.{split}.{subset}.log",
    benchmark:
        "results/benchmarks/translate/{system}.{split}.{subset}.tsv"
    shell:
        "rnnmt translate --model {input.models} --input {input.src} --output {output.text} --align-output {output.align} "
        "--batch-size {params.batch} {params.flags} --threads {threads} > {log} 2>&1"


rule unk_dictionary:
    input:
        unpack(lambda w: {"src": f"results/data/selected/{w.pair}/train.{langs(w.pair)[0]}",
                          "tgt": f"results/data/selected/{w.pair}/train.{langs(w.pair)[1]}", **vocab_files(w.pair)}),  # fmt: skip
    output:
        "results/data/unkdict/{pair}.tsv",
    log:
        "results/logs/unk_dictionary/{pair}.log",
    benchmark:
        "results/benchmarks/unk_dictionary/{pair}.tsv"
    shell:
        "rnnmt unk-dict --src {input.src} --tgt {input.tgt} --src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} "
        "--output {output} > {log} 2>&1"


rule replace_unk:
    input:
        unpack(replace_unk_inputs),
    output:
        "results/translations/{system}/{split}.unk.txt",
    wildcard_constraints:
        split=TEST_SPLITS,
    log:
        "results/logs/replace_unk/{system}.{split}.log",
    shell:
        "rnnmt replace-unk --model {input.model} --hyps {input.hyps} --align {input.align} --src {input.src} "
        "--unk-dict {input.dictionary} --output {output} > {log} 2>&1"


rule score:
    input:
        unpack(score_inputs),
    output:
        "results/scores/{name}.json",
    wildcard_constraints:
        # [SPLIT/]SYSTEM[.unk]: no folder for the first test set (score_name_parts).
        name=r"(({})/)?({})(\.unk)?".format(
            "|".join(map(re.escape, NAMED_TEST_SPLITS)) or "NONE", "|".join(map(re.escape, SYSTEMS + ENSEMBLES)) or "NONE"
        ),
    params:
        lang=lambda w: tgt_lang(score_name_parts(w.name)[1]),
        threshold=config["evaluation"]["long_threshold"],
        fig=LENGTH_CURVE,
        groups=config["figures"].get("luong2015_fig6", {}).get("group_size", 200),
        flags=score_flags,
    log:
        "results/logs/score/{name}.log",
    shell:
        "rnnmt score --hyps {input.hyps} {params.flags} "
        "--refs-tok {input.refs_tok} --refs-raw {input.refs_raw} --src-tok {input.src_tok} --lang {params.lang} "
        "--window {params.fig[window]} --max-length {params.fig[max_length]} --length-by {params.fig[length_by]} "
        "--group-size {params.groups} --threshold {params.threshold} --output {output} > {log} 2>&1"
