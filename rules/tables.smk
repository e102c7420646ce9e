# The paper's tables (results/tables/) and the leaderboard page (results/leaderboard.html).
# The tables read the provenance stamp; the leaderboard also reads the bootstrap intervals.


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
        version=TABLES_VERSION,
    script:
        "../scripts/leaderboard.py"
