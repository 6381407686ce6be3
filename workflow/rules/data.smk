# Raw corpora, one pair of files per corpus under results/data/raw/<pair>/: generated at the demo scale;
# downloaded, verified, extracted and assembled from the WMT archives, or from a scale's own files
# (data.files: each is an "archive" fetched from its URL or linked from its path) otherwise. Then the splits
# (pool / in-domain / dev / test / pre-selected) of each pair.

if PLAN.demo:

    rule generate_demo_corpus:
        output:
            INPUTS.demo_corpus_outputs(),
            report=paths.raw_report("en-fr"),
        log:
            paths.log("generate_demo_corpus", "en-fr"),
        params:
            flags=INPUTS.demo_corpus_flags,
        shell:
            "rnnmt demo-corpus {params.flags} > {log} 2>&1"

else:

    # Compute nodes often have no internet: archives are fetched where snakemake runs.
    localrules:
        download_archive,

    rule download_archive:
        input:
            INPUTS.download_source,
        output:
            archive=paths.archive(),
            record=paths.archive("{file}.json"),
        log:
            paths.log("download", "{file}"),
        benchmark:
            paths.benchmark("download", "{file}")
        params:
            flags=INPUTS.download_flags,
        shell:
            "rnnmt download {params.flags} {INPUTS.download_origin} --output {output.archive} --report {output.record} > {log} 2>&1"

    rule extract_member:
        input:
            INPUTS.archive_of,
        output:
            # Only an intermediate copy: the raw corpus below is what later stages read.
            temp(paths.extracted()),
        log:
            paths.log("extract", "{archive}/{member}"),
        benchmark:
            paths.benchmark("extract", "{archive}/{member}")
        wildcard_constraints:
            member=r"[^=]+",
        shell:
            "rnnmt extract --archive {input} --member {wildcards.member}={output} > {log} 2>&1"

    rule assemble_raw:
        input:
            unpack(INPUTS.raw_corpus),
        output:
            src=paths.raw("{src}-{tgt}", "{corpus}", "{src}"),
            tgt=paths.raw("{src}-{tgt}", "{corpus}", "{tgt}"),
            report=paths.raw("{src}-{tgt}", "{corpus}", "json"),
        log:
            paths.log("assemble_raw", "{src}-{tgt}.{corpus}"),
        benchmark:
            paths.benchmark("assemble_raw", "{src}-{tgt}.{corpus}")
        params:
            flags=INPUTS.raw_corpus_flags,
        shell:
            "rnnmt raw-corpus --name {wildcards.corpus} --src {input.src} --tgt {input.tgt} {params.flags} "
            "--out-src {output.src} --out-tgt {output.tgt} --report {output.report} > {log} 2>&1"

    rule corpus_report:
        input:
            INPUTS.corpus_reports,
        output:
            paths.raw_report(),
        log:
            paths.log("corpus_report", "{pair}"),
        shell:
            "rnnmt corpus-report --pair {wildcards.pair} --input {input} --output {output} > {log} 2>&1"


rule assemble_corpus:
    input:
        unpack(INPUTS.split_files),
    output:
        src=paths.corpus("{src}-{tgt}", "{split}", "{src}"),
        tgt=paths.corpus("{src}-{tgt}", "{split}", "{tgt}"),
        report=paths.corpus("{src}-{tgt}", "{split}", "json"),
    log:
        paths.log("assemble_corpus", "{src}-{tgt}.{split}"),
    shell:
        "rnnmt assemble --src {input.src} --tgt {input.tgt} --out-src {output.src} --out-tgt {output.tgt} " "--report {output.report} > {log} 2>&1"
