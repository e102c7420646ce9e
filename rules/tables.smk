rule tables:
    input:
        metrics="results/metrics/metrics.parquet",
        runs=expand("results/parsed/{model}.run.json", model=MODELS),
        parsed=expand("results/parsed/{model}.parquet", model=MODELS),
        stamp="results/stamp.json",
    output:
        table_outputs(),
    log:
        "results/logs/tables.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        models=[
            {
                k: m.get(k)
                for k in ("name", "display_name", "group", "reasoning_only", "backend")
            }
            for m in config["models"]
        ],
        formats=config["tables"]["formats"],
        version=TABLES_VERSION,
    script:
        "../scripts/tables.py"
