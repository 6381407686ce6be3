# Raw corpora (synthetic at the demo scale) and their assembly into pool / in-domain / dev / test splits.

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
    sys.exit(
        f"rnnmt: scale '{config['scale']}' reads the WMT'14 archives, and this version has no WMT'14 download "
        "stage yet; run the demo scale (snakemake --cores all)."
    )


rule assemble_corpus:
    input:
        unpack(raw_files),
    output:
        src="results/data/corpus/{src}-{tgt}/{split}.{src}",
        tgt="results/data/corpus/{src}-{tgt}/{split}.{tgt}",
    log:
        "results/logs/assemble_corpus/{src}-{tgt}.{split}.log",
    shell:
        "rnnmt assemble --src {input.src} --tgt {input.tgt} --out-src {output.src} --out-tgt {output.tgt} > {log} 2>&1"
