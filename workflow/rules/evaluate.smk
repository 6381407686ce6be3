# The No-UNK subset (once per pair, so once per table), beam-search translation (one model or an
# ensemble), UNK replacement with a dictionary learned from the training data (Luong), BLEU. Each runs on a
# test split: `test` (a pair's first test set) or `test-CORPUS` (another that a table names).


rule nounk_subset:
    input:
        unpack(INPUTS.nounk_subset),
    output:
        paths.nounk_ids("{src}-{tgt}", "{split}"),
    log:
        paths.log("nounk_subset", "{src}-{tgt}.{split}"),
    wildcard_constraints:
        split=PLAN.test_splits,
    params:
        bpe=INPUTS.bpe_flags,
    shell:
        "rnnmt nounk-subset --src {input.src} --ref {input.ref} --src-vocab {input.src_vocab} "
        "--tgt-vocab {input.tgt_vocab} {params.bpe} --output {output} > {log} 2>&1"


rule translate:
    input:
        unpack(INPUTS.translate),
    output:
        text=paths.translation(),
        align=paths.translation(ext="align"),
    log:
        paths.log("translate", "{system}.{split}.{subset}"),
    benchmark:
        paths.benchmark("translate", "{system}.{split}.{subset}")
    wildcard_constraints:
        split=PLAN.test_splits,
    threads: 1
    # Profiles give decoding a GPU as they do training.
    resources:
        gpu=0,
    params:
        batch=SCALE["evaluation"]["batch_size"],
        flags=INPUTS.translate_flags,
    shell:
        "rnnmt translate --model {input.models} --decode {input.decode} --input {input.src} --output {output.text} "
        "--align-output {output.align} --batch-size {params.batch} {params.flags} --threads {threads} > {log} 2>&1"


rule unk_dictionary:
    input:
        unpack(INPUTS.unk_dictionary),
    output:
        paths.unk_dictionary(),
    log:
        paths.log("unk_dictionary", "{pair}"),
    benchmark:
        paths.benchmark("unk_dictionary", "{pair}")
    shell:
        "rnnmt unk-dict --src {input.src} --tgt {input.tgt} --src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} " "--output {output} > {log} 2>&1"


rule replace_unk:
    input:
        unpack(INPUTS.replace_unk),
    output:
        paths.translation(subset="unk"),
    log:
        paths.log("replace_unk", "{system}.{split}"),
    wildcard_constraints:
        split=PLAN.test_splits,
    shell:
        "rnnmt replace-unk --model {input.model} --hyps {input.hyps} --align {input.align} --src {input.src} "
        "--unk-dict {input.dictionary} --output {output} > {log} 2>&1"


rule score:
    input:
        unpack(INPUTS.score),
    output:
        paths.scores("{score}"),
    log:
        paths.log("score", "{score}"),
    params:
        flags=INPUTS.score_flags,
    shell:
        "rnnmt score --hyps {input.hyps} --refs-tok {input.refs_tok} --refs-raw {input.refs_raw} --src-tok {input.src_tok} "
        "{params.flags} --output {output} > {log} 2>&1"
