# Tokenization (sacremoses), vocabulary (shortlist or BPE), binarization.


rule tokenize:
    input:
        "results/data/corpus/{pair}/{split}.{lang}",
    output:
        "results/data/tok/{pair}/{split}.{lang}",
    params:
        flags=tokenizer_flags,
    threads: 8
    log:
        "results/logs/tokenize/{pair}.{split}.{lang}.log",
    benchmark:
        "results/benchmarks/tokenize/{pair}.{split}.{lang}.tsv"
    shell:
        "rnnmt tokenize --lang {wildcards.lang} --input {input} --output {output} {params.flags} --threads {threads} > {log} 2>&1"


rule learn_bpe:
    input:
        "results/data/selected/{pair}/train.{lang}",
    output:
        "results/data/vocab/{pair}/bpe.{lang}.codes",
    params:
        merges=PRESET["vocab"]["bpe_merges"],
    log:
        "results/logs/learn_bpe/{pair}.{lang}.log",
    shell:
        "rnnmt learn-bpe --input {input} --merges {params.merges} --output {output} > {log} 2>&1"


rule build_vocab:
    input:
        text="results/data/selected/{pair}/train.{lang}",
        codes=lambda w: f"results/data/vocab/{w.pair}/bpe.{w.lang}.codes" if BPE else [],
    output:
        "results/data/vocab/{pair}/vocab.{lang}.json",
    params:
        size=lambda w: PRESET["vocab"]["pair_sizes"].get(w.pair, PRESET["vocab"]["size"]),
        bpe=lambda w, input: f"--bpe {input.codes}" if BPE else "",
    log:
        "results/logs/build_vocab/{pair}.{lang}.log",
    shell:
        "rnnmt vocab --input {input.text} --size {params.size} {params.bpe} --output {output} > {log} 2>&1"


rule binarize:
    input:
        unpack(binarize_inputs),
    output:
        "results/data/bin/{src}-{tgt}/{part}.pt",
    wildcard_constraints:
        part="train|dev|test",
    params:
        bpe=lambda w, input: bpe_flags(input),
    log:
        "results/logs/binarize/{src}-{tgt}.{part}.log",
    shell:
        "rnnmt binarize --src {input.src} --tgt {input.tgt} --src-vocab {input.src_vocab} --tgt-vocab {input.tgt_vocab} "
        "{params.bpe} --output {output} > {log} 2>&1"
