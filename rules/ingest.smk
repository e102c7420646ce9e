rule ingest:
    input:
        manifest_files(),
    output:
        "results/benchmark/samples.parquet",
    log:
        "results/logs/ingest.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        data_root=lambda wildcards: config["data_root"],
        tasks=TASKS,
        version=INGEST_VERSION,
    script:
        "../scripts/ingest.py"
