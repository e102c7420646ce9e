# How jobs map onto a cluster (docs/cluster.md): per-provider job caps, sharded inference and
# where API-calling jobs run. Included before the inference rules, which use these helpers.
from dualcog.cluster import provider_resources, provider_slot
from dualcog.errors import ConfigError
from dualcog.sharding import shard_count

API_RESOURCES = provider_resources(config["models"])
SHARDED_MODELS = [m["name"] for m in config["models"] if shard_count(m) > 1]
if set(SHARDED_MODELS) & set(SERVED_RUNS):
    raise ConfigError(
        f"model {sorted(set(SHARDED_MODELS) & set(SERVED_RUNS))[0]}: `shards` splits the jobs "
        "of the infer rule; a model with `serve:` is answered by one job per server "
        "(drop `shards` or `serve`)"
    )


def _slot_of(resource):
    return lambda wildcards: provider_slot(
        model_by_name(config, wildcards.model), resource
    )


def api_job_resources():
    """api_<provider>=1 for jobs of that provider's models, 0 for the others."""
    return {resource: _slot_of(resource) for resource in API_RESOURCES}


def shard_files(wildcards):
    """The shard outputs that assemble_shards joins for one (model, task)."""
    count = shard_count(model_by_name(config, wildcards.model))
    return [
        f"results/responses/{wildcards.model}/{wildcards.task}.shard{i}of{count}.parquet"
        for i in range(1, count + 1)
    ]


# api_jobs: local keeps the jobs that call APIs on the machine running Snakemake (a login
# node with internet); cluster (the default) submits them like any other job.
if config.get("api_jobs", "cluster") == "local":

    localrules:
        infer,
        infer_shard,
