rule pairs:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/benchmark/pairs.parquet",
    log:
        "results/logs/pairs.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        version=SCORER_VERSION,
    script:
        "../scripts/pairs.py"


# The bootstrap's seeded replicate weights: the same for every model, so drawn once (a tenth
# to a fifth of a CPU second at the paper's scale) rather than in each `score` job.
rule bootstrap_weights:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/benchmark/bootstrap_weights.parquet",
    log:
        "results/logs/bootstrap_weights.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        bootstrap=config["bootstrap"],
        version=STATS_VERSION,
    script:
        "../scripts/bootstrap_weights.py"


# Parses, scores, metrics and the metrics' bootstrap intervals of one model run, in one job
# (dualcog.evaluate): each step takes milliseconds, a job a start-up. Runs answered one job
# per run are scored by that job (rules/inference.smk). A change of the parser, the scorer or
# the bootstrap settings reruns this job (its params) and what reads its outputs.
rule score:
    input:
        samples="results/benchmark/samples.parquet",
        pairs="results/benchmark/pairs.parquet",
        weights="results/benchmark/bootstrap_weights.parquet",
        responses=responses_of,
    output:
        **SCORED_RUN_OUTPUTS,
    log:
        "results/logs/score/{model}.log",
    wildcard_constraints:
        model=names_regex([name for name in MODELS if name not in PER_RUN_RUNS]),
    conda:
        "../envs/dualcog.yaml"
    params:
        **scoring_params(),
    script:
        "../scripts/score.py"


rule collect_metrics:
    input:
        metrics=expand("results/metrics/by_model/{model}.parquet", model=MODELS),
        stamp="results/stamp.json",
    output:
        "results/metrics/metrics.parquet",
    log:
        "results/logs/collect_metrics.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/collect_metrics.py"
