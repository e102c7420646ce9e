# How jobs map onto a cluster (docs/cluster.md): per-provider job caps, sharded inference and
# where API-calling jobs run. Included before the inference rules, which use these helpers.
from dualcog.backends import calls_provider
from dualcog.cluster import (
    provider_caps,
    provider_of,
    provider_resources,
    provider_slot,
)
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


# The one job of all API runs (rules/api.smk, docs/performance.md "Live run").
API_RUNS = [
    name
    for name in INFER_RUNS
    if calls_provider(model_by_name(config, name))
    and shard_count(model_by_name(config, name)) == 1
]


def api_plan():
    """One unit per (run, task): the first task of every run, then the second, ... so that
    every run's budget is in use from the start."""
    runs = [model_by_name(config, name) for name in API_RUNS]
    return [
        {
            "run": model["name"],
            "task": task,
            "provider": provider_of(model),
            "prompts": prompts_path(model["name"], task),
            "output": f"results/responses/{model['name']}/{task}.parquet",
            "log": f"results/logs/infer/{model['name']}/{task}.log",
        }
        for task in TASKS
        for model in runs
        if task in model_tasks(config, model)
    ]


def api_bound_s(wildcards, input):
    """The least seconds the unit's requests take at the runs' limits and the caps
    (dualcog.estimate.providers_bound_s), for the console's ETA; 0 until the prompts exist.
    """
    from pathlib import Path

    from pyarrow.parquet import read_metadata

    from dualcog.estimate import providers_bound_s

    if not all(Path(path).exists() for path in input.prompts):
        return 0
    rows = {path: read_metadata(path).num_rows for path in input.prompts}
    requests = {}
    for unit in api_plan():
        requests[unit["run"]] = requests.get(unit["run"], 0) + rows[unit["prompts"]]
    models = {name: model_by_name(config, name) for name in API_RUNS}
    providers = {name: provider_of(model) for name, model in models.items()}
    return round(
        providers_bound_s(
            requests, models, providers, API_CAPS.per_provider, API_CAPS.total
        )
    )


API_CAPS = provider_caps(
    workflow.global_resources, {provider_of(model_by_name(config, n)) for n in API_RUNS}
)
