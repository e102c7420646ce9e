rule infer:
    input:
        prompts=prompts_for,
        samples="results/benchmark/samples.parquet",
    output:
        "results/responses/{model}/{task}.parquet",
    log:
        "results/logs/infer/{model}/{task}.log",
    conda:
        "../envs/dualcog.yaml"
    resources:
        api_slots=1,
    params:
        settings=infer_settings,
        media_store=config["media"]["store"],
        cache_dir=config["cache_dir"],
    script:
        "../scripts/infer.py"
