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
        exclude_samples=config["exclude_samples"],
        media_roots=config["media_roots"],
        version=INGEST_VERSION,
    script:
        "../scripts/ingest.py"
