# Runs that call a provider's API (docs/performance.md, "Live run"): one job answers all of
# them, each (run, task) a thread of it, so that waiting on providers holds no core and no more
# than one of Snakemake's job slots. The caps `api_<provider>` and `api_slots` (--resources or
# a profile's `resources:`) bound the units at once inside it, as they bound jobs elsewhere;
# each run's rate limits hold as before (dualcog.inference.budget). Sharded runs keep their
# infer_shard jobs (rules/shards.smk).
from dualcog.backends import calls_provider
from dualcog.cluster import provider_caps, provider_of

API_RUNS = [
    name
    for name in INFER_RUNS
    if calls_provider(model_by_name(config, name)) and shard_count(model_by_name(config, name)) == 1
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
    (dualcog.estimate.providers_bound_s), for the console's ETA; 0 until the prompts exist."""
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


if API_RUNS:

    rule infer_api:
        input:
            prompts=sorted({unit["prompts"] for unit in api_plan()}),
            samples="results/benchmark/samples.parquet",
            media=sorted(
                {
                    path
                    for name in API_RUNS
                    for path in prepared_media(
                        name, model_tasks(config, model_by_name(config, name))
                    )
                }
            ),
        output:
            [unit["output"] for unit in api_plan()],
        log:
            job="results/logs/infer/api.log",
            # each unit's lines, where its own job would have written them
            units=[unit["log"] for unit in api_plan()],
        conda:
            "../envs/dualcog.yaml"
        # Threads waiting on sockets: no core of --cores. It does hold the whole cap of each
        # provider it calls, so sharded jobs of those providers run after it.
        threads: 0
        resources:
            **API_CAPS.job_resources,
            api_bound_s=api_bound_s,
        params:
            plan=api_plan(),
            caps=API_CAPS.per_provider,
            total=API_CAPS.total,
            settings={name: answer_settings(model_by_name(config, name)) for name in API_RUNS},
            media_store=config["media"]["store"],
            cache_dir=config["cache_dir"],
        script:
            "../scripts/infer_api.py"

    # api_jobs: local (rules/cluster.smk): it runs where Snakemake runs, e.g. a login node.
    if config.get("api_jobs", "cluster") == "local":

        localrules:
            infer_api,
