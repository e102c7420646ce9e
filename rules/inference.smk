rule infer:
    input:
        prompts=prompts_for,
        samples="results/benchmark/samples.parquet",
    output:
        "results/responses/{model}/{task}.parquet",
    params:
        settings=infer_settings,
        media_store=config["media"]["store"],
        cache_dir=config["cache_dir"],
    resources:
        api_slots=1,
    log:
        "results/logs/infer/{model}/{task}.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/infer.py"
