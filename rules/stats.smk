# Uncertainty: intervals of every metric (made by each model's `score` job, rules/score.smk),
# paired model comparisons.


wildcard_constraints:
    model_a="|".join(re.escape(m) for m in [*MODELS, *REPEAT_SETS]),
    model_b="|".join(re.escape(m) for m in [*MODELS, *REPEAT_SETS]),
    repeat_set=names_regex(REPEAT_SETS),


rule collect_intervals:
    input:
        expand(
            "results/metrics/intervals_by_model/{model}.parquet",
            model=[*MODELS, *REPEAT_SETS],
        ),
    output:
        "results/metrics/intervals.parquet",
    log:
        "results/logs/collect_intervals.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/collect_intervals.py"


# A repeat set's metrics: the mean over its repeats and the bootstrap interval of that mean
# (each repeat under the same replicate weights; dualcog.stats.repeat_sets).
rule set_intervals:
    input:
        samples="results/benchmark/samples.parquet",
        pairs="results/benchmark/pairs.parquet",
        weights="results/benchmark/bootstrap_weights.parquet",
        scores=lambda w: expand(
            "results/scores/{run}.parquet", run=runs_of(w.repeat_set)
        ),
    output:
        "results/metrics/intervals_by_model/{repeat_set}.parquet",
    log:
        "results/logs/set_intervals/{repeat_set}.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        bootstrap=config["bootstrap"],
        version=STATS_VERSION,
    script:
        "../scripts/set_intervals.py"


rule compare:
    input:
        samples="results/benchmark/samples.parquet",
        scores_a=lambda w: expand(
            "results/scores/{run}.parquet", run=runs_of(w.model_a)
        ),
        scores_b=lambda w: expand(
            "results/scores/{run}.parquet", run=runs_of(w.model_b)
        ),
    output:
        parquet="results/compare/{model_a}__vs__{model_b}.parquet",
        markdown="results/compare/{model_a}__vs__{model_b}.md",
    log:
        "results/logs/compare/{model_a}__vs__{model_b}.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        bootstrap=config["bootstrap"],
        display_names=compare_display_names(),
        repeats=REPEAT_SIZES,
        version=STATS_VERSION,
    script:
        "../scripts/compare.py"
