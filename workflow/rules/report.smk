# Tables, figures and provenance (cheap: they run locally), and the alignments behind Figure 3.


localrules:
    table,
    figure_length,
    figure_alignments,
    provenance,


rule table:
    input:
        lambda w: [TABLE_FILES[config["tables"][w.table]["kind"]].format(system=s) for s in table_systems(w.table)],
    output:
        csv="results/tables/{table}.csv",
        md="results/tables/{table}.md",
    params:
        spec=lambda w: table_spec(w.table, TABLE_FILES[config["tables"][w.table]["kind"]]),
    log:
        "results/logs/table/{table}.log",
    shell:
        "rnnmt table --spec {params.spec:q} --csv {output.csv} --md {output.md} > {log} 2>&1"


rule figure_length:
    input:
        lambda w: [f"results/scores/{s}.json" for s in table_systems(config["figures"]["bahdanau2014_fig2"]["table"])],
    output:
        "results/figures/bahdanau2014_fig2.png",
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
        fig=config["figures"].get("bahdanau2014_fig3", {}),
        beam=config["evaluation"]["beam"],
    threads: 1
    log:
        "results/logs/alignments/{system}.log",
    benchmark:
        "results/benchmarks/alignments/{system}.tsv"
    shell:
        "rnnmt align --model {input.model} --test-src {input.src} --nounk-ids {input.ids} {params.fixed:q} "
        "--random {params.fig[random]} --min-length {params.fig[min_length]} --max-length {params.fig[max_length]} "
        "--seed {params.fig[seed]} --beam {params.beam} --threads {threads} --output {output} > {log} 2>&1"


rule figure_alignments:
    input:
        lambda w: f"results/alignments/{config['figures']['bahdanau2014_fig3']['system']}.json",
    output:
        "results/figures/bahdanau2014_fig3.png",
    params:
        title=lambda w: f"Alignments found by {config['systems'][config['figures']['bahdanau2014_fig3']['system']]['label']}",
    log:
        "results/logs/figure_alignments.log",
    shell:
        "rnnmt plot-alignments --input {input} --title {params.title:q} --output {output} > {log} 2>&1"


rule provenance:
    output:
        "results/provenance.json",
    params:
        config=json.dumps(config, sort_keys=True),
    log:
        "results/logs/provenance.log",
    shell:
        "rnnmt provenance --config {params.config:q} --output {output} > {log} 2>&1"
