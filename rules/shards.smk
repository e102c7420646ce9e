# Sharded inference (docs/cluster.md): a model with `shards: N` answers each request kind in N
# infer_shard jobs; assemble_shards joins them into the same responses file that `infer`
# writes for unsharded models. With shards: 1 (the default) these rules take no part.
ruleorder: assemble_shards > infer


rule infer_shard:
    input:
        prompts=prompts_for,
        samples="results/benchmark/samples.parquet",
        replay=replay_sources,
        media=media_for,
    output:
        "results/responses/{model}/{task}.shard{shard}of{shards}.parquet",
    log:
        "results/logs/infer/{model}/{task}.shard{shard}of{shards}.log",
    wildcard_constraints:
        shard=r"[1-9]\d*",
        shards=r"[1-9]\d*",
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


rule assemble_shards:
    input:
        prompts=prompts_for,
        shards=shard_files,
    output:
        "results/responses/{model}/{task}.parquet",
    log:
        "results/logs/infer/{model}/{task}.assemble.log",
    wildcard_constraints:
        # never matches when no model is sharded
        model="|".join(re.escape(m) for m in SHARDED_MODELS) or "(?!)",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/assemble_shards.py"
