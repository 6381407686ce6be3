# Tables, figures and provenance (cheap: they run locally), and the alignments behind the alignment figures.
# What each table, figure, claim and coverage row reads is in its settings file (results/config/, rule settings).


localrules:
    table,
    claims,
    variants,
    coverage,
    figure,
    provenance,


rule table:
    input:
        files=REPORTS.table_inputs,
        spec=paths.settings("tables/{table}"),
    output:
        csv=report(paths.table(ext="csv"), caption="../report/table.rst", category="1. Tables"),
        md=paths.table(),
    log:
        paths.log("table", "{table}"),
    shell:
        "rnnmt table --spec {input.spec} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule claims:
    input:
        files=REPORTS.claims_inputs,
        spec=paths.settings("claims"),
    output:
        csv=report(paths.table("claims", "csv"), caption="../report/claims.rst", category="3. Claims"),
        md=paths.table("claims"),
    log:
        paths.log("report", "claims"),
    shell:
        "rnnmt claims --spec {input.spec} --csv {output.csv} --md {output.md} > {log} 2>&1"


# Each variant (config `variants`) against its baseline: significance, perplexity, BLEU by length.
rule variants:
    input:
        files=REPORTS.variants_inputs,
        spec=paths.settings("variants"),
    output:
        csv=report(paths.table("variants", "csv"), caption="../report/variants.rst", category="1. Tables"),
        md=paths.table("variants"),
    log:
        paths.log("report", "variants"),
    shell:
        "rnnmt variants --spec {input.spec} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule coverage:
    input:
        spec=paths.settings("coverage"),
    output:
        csv=report(paths.table("coverage", "csv"), caption="../report/coverage.rst", category="4. Coverage"),
        md=paths.table("coverage"),
    log:
        paths.log("report", "coverage"),
    shell:
        "rnnmt coverage --spec {input.spec} --csv {output.csv} --md {output.md} > {log} 2>&1"


# One rule for every figure of config.yaml's `figures`: its settings file names its kind and the files it draws.
rule figure:
    input:
        files=REPORTS.figure_inputs,
        spec=paths.settings("figures/{figure}"),
    output:
        report(paths.figure("{figure}"), caption="../report/figure.rst", category="2. Figures"),
    log:
        paths.log("figure", "{figure}"),
    shell:
        "rnnmt figure --spec {input.spec} --output {output} > {log} 2>&1"


rule alignments:
    input:
        unpack(INPUTS.alignments),
    output:
        paths.alignments(),
    log:
        paths.log("alignments", "{system}"),
    benchmark:
        paths.benchmark("alignments", "{system}")
    threads: 1
    # Profiles give it a GPU as they do translation: it decodes with the system's beam.
    resources:
        gpu=0,
    params:
        flags=INPUTS.alignment_flags,
    shell:
        "rnnmt align --model {input.model} --decode {input.decode} --test-src {input.src} --nounk-ids {input.ids} "
        "{params.flags} --threads {threads} --output {output} > {log} 2>&1"


rule provenance:
    input:
        config=paths.settings("provenance"),
    output:
        paths.provenance(),
    log:
        paths.log("report", "provenance"),
    shell:
        "rnnmt provenance --config {input.config} --output {output} > {log} 2>&1"
