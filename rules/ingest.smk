rule ingest:
    input:
        manifest_files(),
        download_record(config),
    output:
        "results/benchmark/samples.parquet",
        "results/benchmark/excluded.json",
    log:
        "results/logs/ingest.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        data_root=lambda wildcards: config["data_root"],
        tasks=TASKS,
        exclude_samples=config.get("exclude_samples", []),
        version=INGEST_VERSION,
    script:
        "../scripts/ingest.py"
