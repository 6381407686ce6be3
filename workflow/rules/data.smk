# Raw corpora, one pair of files per corpus under results/data/raw/<pair>/: generated at the demo scale;
# downloaded, verified, extracted and assembled from the WMT archives otherwise. Then the splits
# (pool / in-domain / dev / test / pre-selected) of each pair.

if DEMO:

    rule generate_demo_corpus:
        output:
            expand(
                "results/data/raw/en-fr/{corpus}.{lang}",
                corpus=list(PRESET["data"].get("sizes", {})),
                lang=["en", "fr"],
            ),
            report="results/data/raw/en-fr/report.json",
        params:
            sizes=" ".join(f"--size {k}={v}" for k, v in PRESET["data"].get("sizes", {}).items()),
            seed=PRESET["data"]["seed"],
        log:
            "results/logs/generate_demo_corpus.log",
        shell:
            "rnnmt demo-corpus --out-dir results/data/raw/en-fr --seed {params.seed} {params.sizes} > {log} 2>&1"

else:

    # Compute nodes often have no internet: archives are fetched where snakemake runs.
    localrules:
        download_archive,

    rule download_archive:
        output:
            archive="results/data/archives/{file}",
            record="results/data/archives/{file}.json",
        params:
            flags=download_flags,
        log:
            "results/logs/download/{file}.log",
        benchmark:
            "results/benchmarks/download/{file}.tsv"
        shell:
            "rnnmt download {params.flags} --output {output.archive} --report {output.record} > {log} 2>&1"

    rule extract_member:
        input:
            lambda w: f"results/data/archives/{rnnmt_sources.file_name(SOURCES, w.archive)}",
        output:
            # Only an intermediate copy: the raw corpus below is what later stages read.
            temp("results/data/extracted/{archive}/{member}"),
        wildcard_constraints:
            member=r"[^=]+",
        log:
            "results/logs/extract/{archive}/{member}.log",
        benchmark:
            "results/benchmarks/extract/{archive}/{member}.tsv"
        shell:
            "rnnmt extract --archive {input} --member {wildcards.member}={output} > {log} 2>&1"

    rule assemble_raw:
        input:
            unpack(raw_corpus_inputs),
        output:
            src="results/data/raw/{src}-{tgt}/{corpus}.{src}",
            tgt="results/data/raw/{src}-{tgt}/{corpus}.{tgt}",
            report="results/data/raw/{src}-{tgt}/{corpus}.json",
        params:
            flags=raw_corpus_flags,
        log:
            "results/logs/assemble_raw/{src}-{tgt}.{corpus}.log",
        benchmark:
            "results/benchmarks/assemble_raw/{src}-{tgt}.{corpus}.tsv"
        shell:
            "rnnmt raw-corpus --name {wildcards.corpus} --src {input.src} --tgt {input.tgt} {params.flags} "
            "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} > {log} 2>&1"

    rule corpus_report:
        input:
            corpus_reports,
        output:
            "results/data/raw/{pair}/report.json",
        log:
            "results/logs/corpus_report/{pair}.log",
        shell:
            "rnnmt corpus-report --pair {wildcards.pair} --input {input} --output {output} > {log} 2>&1"


rule assemble_corpus:
    input:
        unpack(raw_files),
    output:
        src="results/data/corpus/{src}-{tgt}/{split}.{src}",
        tgt="results/data/corpus/{src}-{tgt}/{split}.{tgt}",
        report="results/data/corpus/{src}-{tgt}/{split}.json",
    log:
        "results/logs/assemble_corpus/{src}-{tgt}.{split}.log",
    shell:
        "rnnmt assemble --src {input.src} --tgt {input.tgt} --out-src {output.src} --out-tgt {output.tgt} "
        "--report {output.report} > {log} 2>&1"
