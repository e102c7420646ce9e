# The paper's tables (results/tables/) and the leaderboard page (results/leaderboard.html).
# The tables read the provenance stamp; the leaderboard also reads the bootstrap intervals.
# `estimate` lists what a run would still send and cost, sending nothing.


rule tables:
    input:
        unpack(stamp_input),
        metrics="results/metrics/metrics.parquet",
        runs=expand("results/parsed/{model}.run.json", model=MODELS),
        facts=expand("results/parsed/{model}.facts.parquet", model=MODELS),
        outcomes=expand("results/parsed/{model}.outcomes.parquet", model=MODELS),
    output:
        table_report_outputs(),
    log:
        "results/logs/tables.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        models=TABLE_MODELS,
        formats=config["tables"]["formats"],
        prices=MODEL_PRICES,
        version=TABLES_VERSION,
    script:
        "../scripts/tables.py"


rule leaderboard:
    input:
        unpack(optional_result_inputs),
        metrics="results/metrics/metrics.parquet",
        runs=expand("results/parsed/{model}.run.json", model=MODELS),
        facts=expand("results/parsed/{model}.facts.parquet", model=MODELS),
        outcomes=expand("results/parsed/{model}.outcomes.parquet", model=MODELS),
    output:
        report(
            "results/leaderboard.html",
            caption="../report/leaderboard.rst",
            category="Leaderboard",
            labels={"page": "leaderboard"},
        ),
    log:
        "results/logs/leaderboard.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        models=TABLE_MODELS,
        prices=MODEL_PRICES,
        version=TABLES_VERSION,
    script:
        "../scripts/leaderboard.py"


# No output file: the cache changes between runs without Snakemake seeing it, so the
# estimate is made afresh each time it is asked for (it writes results/estimate/ itself).
rule estimate:
    input:
        prompts=sorted(
            {p for tasks in estimate_plan().values() for p in tasks.values()}
        ),
    log:
        "results/logs/estimate.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        plan=estimate_plan(),
        cache_dir=config["cache_dir"],
        folder="results/estimate",
    script:
        "../scripts/estimate.py"
