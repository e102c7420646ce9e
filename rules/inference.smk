rule infer:
    input:
        prompts=prompts_for,
        samples="results/benchmark/samples.parquet",
        replay=replay_sources,
    output:
        "results/responses/{model}/{task}.parquet",
    log:
        "results/logs/infer/{model}/{task}.log",
    wildcard_constraints:
        model=names_regex(UNSERVED_RUNS),
    conda:
        "../envs/dualcog.yaml"
    resources:
        **api_job_resources(),
        api_slots=1,
    params:
        settings=infer_settings,
        media_store=config["media"]["store"],
        cache_dir=config["cache_dir"],
    script:
        "../scripts/infer.py"


def print_inference_summary():
    """Called from the Snakefile's onsuccess/onerror: models with failed requests and what to type."""
    from dualcog.inference.outcome import run_summary

    for line in run_summary(config):
        print(line, file=sys.stderr)
