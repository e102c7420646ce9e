# The paper's tables (results/tables/) and the leaderboard page (results/leaderboard.html).
# The tables read the provenance stamp; the leaderboard also reads the bootstrap intervals.
# `estimate` lists what a run would still send and cost, sending nothing.

# USD per million tokens of the runs that give them (they change dollars, never answers).
MODEL_PRICES = {m["name"]: m["prices"] for m in config["models"] if m.get("prices")}


rule tables:
    input:
        unpack(stamp_input),
        metrics="results/metrics/metrics.parquet",
        runs=expand("results/parsed/{model}.run.json", model=MODELS),
        parsed=expand("results/parsed/{model}.parquet", model=MODELS),
        responses=all_responses(),
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
        parsed=expand("results/parsed/{model}.parquet", model=MODELS),
        responses=all_responses(),
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


def estimate_plan():
    """Run name -> request kind -> the prompts file its requests are built from."""
    return {
        m["name"]: {t: prompts_path(m["name"], t) for t in model_tasks(config, m)}
        for m in config["models"]
    }


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
