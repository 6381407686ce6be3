# Tokenization (sacremoses), vocabulary (shortlist or BPE), binarization.


rule tokenize:
    input:
        paths.corpus(),
    output:
        paths.tok(),
    log:
        paths.log("tokenize", "{pair}.{split}.{lang}"),
    benchmark:
        paths.benchmark("tokenize", "{pair}.{split}.{lang}")
    threads: all_cores
    params:
        flags=INPUTS.tokenizer_flags,
    shell:
        "rnnmt tokenize --lang {wildcards.lang} --input {input} --output {output} {params.flags} --threads {threads} > {log} 2>&1"


rule learn_bpe:
    input:
        INPUTS.bpe_text,
    output:
        paths.bpe_codes(),
    log:
        paths.log("learn_bpe", "{pair}.{codes}"),
    params:
        merges=SCALE["vocab"]["bpe_merges"],
    shell:
        "rnnmt learn-bpe --input {input} --merges {params.merges} --output {output} > {log} 2>&1"


rule build_vocab:
    input:
        text=paths.selected("{pair}", "train.{lang}"),
        codes=INPUTS.vocab_codes,
    output:
        paths.vocab(),
    log:
        paths.log("build_vocab", "{pair}.{lang}"),
    params:
        flags=INPUTS.vocab_flags,
    shell:
        "rnnmt vocab --input {input.text} {params.flags} --output {output} > {log} 2>&1"


rule binarize:
    input:
        unpack(INPUTS.binarize),
    output:
        paths.binarized("{src}-{tgt}", "{part}"),
    log:
        paths.log("binarize", "{src}-{tgt}.{part}"),
    wildcard_constraints:
        part="train|dev|test",
    params:
        bpe=INPUTS.bpe_flags,
    shell:
        "rnnmt binarize --src {input.src} --tgt {input.tgt} --src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} "
        "{params.bpe} --output {output} > {log} 2>&1"
