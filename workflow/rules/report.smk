# Tables, figures and provenance (cheap: they run locally), and the alignments behind the alignment figures.
# What each table, claim and coverage row reads is in its settings file (results/config/, rule settings).


localrules:
    table,
    claims,
    coverage,
    figure_length,
    figure_alignments,
    figure_length_groups,
    figure_learning,
    figure_alignments_compared,
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


rule figure_length:
    input:
        REPORTS.length_curve_inputs,
    output:
        report(paths.figure("bahdanau2014_fig2"), caption="../report/bahdanau2014_fig2.rst", category="2. Figures"),
    log:
        paths.log("report", "figure_length"),
    params:
        flags=REPORTS.length_curve_flags,
    shell:
        "rnnmt plot-length {params.flags:q} --title 'BLEU vs sentence length (full test set)' --output {output} > {log} 2>&1"


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


rule figure_alignments:
    input:
        REPORTS.heatmap_input,
    output:
        report(paths.figure("bahdanau2014_fig3"), caption="../report/bahdanau2014_fig3.rst", category="2. Figures"),
    log:
        paths.log("report", "figure_alignments"),
    params:
        title=REPORTS.heatmap_title,
    shell:
        "rnnmt plot-alignments --input {input} --title {params.title:q} --output {output} > {log} 2>&1"


rule figure_length_groups:
    input:
        REPORTS.length_group_inputs,
    output:
        report(paths.figure("luong2015_fig6"), caption="../report/luong2015_fig6.rst", category="2. Figures"),
    log:
        paths.log("report", "figure_length_groups"),
    params:
        flags=REPORTS.length_group_flags,
    shell:
        "rnnmt plot-length --field length_groups {params.flags:q} "
        "--title 'BLEU by sentence length (groups sorted by reference length)' --output {output} > {log} 2>&1"


rule figure_learning:
    input:
        REPORTS.learning_curve_inputs,
    output:
        report(paths.figure("luong2015_fig5"), caption="../report/luong2015_fig5.rst", category="2. Figures"),
    log:
        paths.log("report", "figure_learning"),
    params:
        flags=REPORTS.learning_curve_flags,
    shell:
        "rnnmt plot-learning {params.flags:q} --title 'Learning curves' --output {output} > {log} 2>&1"


rule figure_alignments_compared:
    input:
        REPORTS.compared_alignment_inputs,
    output:
        report(paths.figure("luong2015_fig7"), caption="../report/luong2015_fig7.rst", category="2. Figures"),
    log:
        paths.log("report", "figure_alignments_compared"),
    params:
        flags=REPORTS.compared_alignment_flags,
    shell:
        "rnnmt plot-alignments --input {input} {params.flags:q} " "--title 'The same sentence aligned by each attention model' --output {output} > {log} 2>&1"


rule provenance:
    input:
        config=paths.settings("provenance"),
    output:
        paths.provenance(),
    log:
        paths.log("report", "provenance"),
    shell:
        "rnnmt provenance --config {input.config} --output {output} > {log} 2>&1"
