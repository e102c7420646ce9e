# Uncertainty: intervals of every metric (made by each model's `score` job, rules/score.smk),
# paired model comparisons.


wildcard_constraints:
    model_a="|".join(re.escape(m) for m in MODELS),
    model_b="|".join(re.escape(m) for m in MODELS),


rule collect_intervals:
    input:
        expand("results/metrics/intervals_by_model/{model}.parquet", model=MODELS),
    output:
        "results/metrics/intervals.parquet",
    log:
        "results/logs/collect_intervals.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/collect_intervals.py"


rule compare:
    input:
        samples="results/benchmark/samples.parquet",
        scores_a="results/scores/{model_a}.parquet",
        scores_b="results/scores/{model_b}.parquet",
    output:
        parquet="results/compare/{model_a}__vs__{model_b}.parquet",
        markdown="results/compare/{model_a}__vs__{model_b}.md",
    log:
        "results/logs/compare/{model_a}__vs__{model_b}.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        bootstrap=config["bootstrap"],
        display_names={
            m["name"]: m.get("display_name") or m["name"] for m in config["models"]
        },
        version=STATS_VERSION,
    script:
        "../scripts/compare.py"
