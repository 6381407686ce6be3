# Tables, figures and provenance (cheap: they run locally), and the alignments behind the alignment figures.


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
        table_inputs,
    output:
        csv=report("results/tables/{table}.csv", caption="../report/table.rst", category="1. Tables"),
        md="results/tables/{table}.md",
    params:
        spec=lambda w: table_spec(w.table),
    log:
        "results/logs/table/{table}.log",
    shell:
        "rnnmt table --spec {params.spec:q} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule claims:
    input:
        claims_inputs,
    output:
        csv=report("results/tables/claims.csv", caption="../report/claims.rst", category="3. Claims"),
        md="results/tables/claims.md",
    params:
        spec=lambda w: claims_spec(),
    log:
        "results/logs/claims.log",
    shell:
        "rnnmt claims --spec {params.spec:q} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule coverage:
    output:
        csv=report("results/tables/coverage.csv", caption="../report/coverage.rst", category="4. Coverage"),
        md="results/tables/coverage.md",
    params:
        rows=lambda w: coverage_rows(),
    log:
        "results/logs/coverage.log",
    run:
        from rnnmt.evaluate.tables import build_coverage_table, write_table

        write_table(build_coverage_table(params.rows), output.csv, output.md, title="What the papers show and what this run regenerates", banner=None)
        Path(log[0]).write_text(f"wrote {output.csv}\n")


rule figure_length:
    input:
        lambda w: [f"results/scores/{s}.json" for s in table_systems(config["figures"]["bahdanau2014_fig2"]["table"])],
    output:
        report("results/figures/bahdanau2014_fig2.png", caption="../report/bahdanau2014_fig2.rst", category="2. Figures"),
    params:
        curves=lambda w, input: [
            f"--curve={config['systems'][s]['label']}={f}"
            for s, f in zip(table_systems(config["figures"]["bahdanau2014_fig2"]["table"]), input)
        ],
        banner=[f"--banner={DEMO_BANNER_PLAIN}"] if DEMO else [],
        xlabel=f"Sentence length ({LENGTH_CURVE['length_by']} tokens, window {LENGTH_CURVE['window']})",
    log:
        "results/logs/figure_length.log",
    shell:
        "rnnmt plot-length {params.curves:q} --title 'BLEU vs sentence length (full test set)' "
        "--xlabel {params.xlabel:q} {params.banner:q} --output {output} > {log} 2>&1"


rule alignments:
    input:
        unpack(alignment_inputs),
    output:
        "results/alignments/{system}.json",
    params:
        fixed=[f"--fixed={s}" for s in PRESET["figures"]["alignment_fixed"]],
        fig=config["figures"].get("bahdanau2014_fig3", {"random": 3, "min_length": 10, "max_length": 20, "seed": 1}),
        beam=lambda w: decode_flags(w.system),
    threads: 1
    log:
        "results/logs/alignments/{system}.log",
    benchmark:
        "results/benchmarks/alignments/{system}.tsv"
    shell:
        "rnnmt align --model {input.model} --test-src {input.src} --nounk-ids {input.ids} {params.fixed:q} "
        "--random {params.fig[random]} --min-length {params.fig[min_length]} --max-length {params.fig[max_length]} "
        "--seed {params.fig[seed]} {params.beam} --threads {threads} --output {output} > {log} 2>&1"


rule figure_alignments:
    input:
        lambda w: f"results/alignments/{config['figures']['bahdanau2014_fig3']['system']}.json",
    output:
        report("results/figures/bahdanau2014_fig3.png", caption="../report/bahdanau2014_fig3.rst", category="2. Figures"),
    params:
        title=lambda w: f"Alignments found by {config['systems'][config['figures']['bahdanau2014_fig3']['system']]['label']}",
    log:
        "results/logs/figure_alignments.log",
    shell:
        "rnnmt plot-alignments --input {input} --title {params.title:q} --output {output} > {log} 2>&1"


rule figure_length_groups:
    input:
        lambda w: [score_file(s, unk) for s, unk in length_group_rows()],
    output:
        report("results/figures/luong2015_fig6.png", caption="../report/luong2015_fig6.rst", category="2. Figures"),
    params:
        curves=lambda w, input: [f"--curve={row_label(s, unk)}={f}" for (s, unk), f in zip(length_group_rows(), input)],
        banner=[f"--banner={DEMO_BANNER_PLAIN}"] if DEMO else [],
        xlabel=f"Sentence length (longest reference in each group of {config['figures'].get('luong2015_fig6', {}).get('group_size', 200)})",
    log:
        "results/logs/figure_length_groups.log",
    shell:
        "rnnmt plot-length --field length_groups {params.curves:q} --title 'BLEU by sentence length (groups sorted by reference length)' "
        "--xlabel {params.xlabel:q} {params.banner:q} --output {output} > {log} 2>&1"


rule figure_learning:
    input:
        lambda w: [f"results/models/{s}/meta.json" for s in learning_curve_systems()],
    output:
        report("results/figures/luong2015_fig5.png", caption="../report/luong2015_fig5.rst", category="2. Figures"),
    params:
        curves=lambda w, input: [f"--curve={label(s)}={f}" for s, f in zip(learning_curve_systems(), input)],
        heldout=config["figures"].get("luong2015_fig5", {}).get("heldout", "test"),
        banner=[f"--banner={DEMO_BANNER_PLAIN}"] if DEMO else [],
    log:
        "results/logs/figure_learning.log",
    shell:
        "rnnmt plot-learning {params.curves:q} --heldout {params.heldout} --title 'Learning curves' "
        "{params.banner:q} --output {output} > {log} 2>&1"


rule figure_alignments_compared:
    input:
        lambda w: [f"results/alignments/{s}.json" for s in alignment_systems()],
    output:
        report("results/figures/luong2015_fig7.png", caption="../report/luong2015_fig7.rst", category="2. Figures"),
    params:
        labels=lambda w: [f"--label={label(s)}" for s in alignment_systems()],
        panel=config["figures"].get("luong2015_fig7", {}).get("panel", 0),
    log:
        "results/logs/figure_alignments_compared.log",
    shell:
        "rnnmt plot-alignments --input {input} {params.labels:q} --panel {params.panel} "
        "--title 'The same sentence aligned by each attention model' --output {output} > {log} 2>&1"


rule provenance:
    output:
        "results/provenance.json",
    params:
        config=json.dumps(config, sort_keys=True),
    log:
        "results/logs/provenance.log",
    shell:
        "rnnmt provenance --config {params.config:q} --output {output} > {log} 2>&1"
