rule ingest:
    input:
        manifest_files(),
    output:
        "results/benchmark/samples.parquet",
    params:
        data_root=config["data_root"],
        tasks=TASKS,
        version=INGEST_VERSION,
    log:
        "results/logs/ingest.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/ingest.py"
