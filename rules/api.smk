# Runs that call a provider's API (docs/performance.md, "Live run"): one job answers all of
# them, each (run, task) a thread of it, so that waiting on providers holds no core and no more
# than one of Snakemake's job slots. The caps `api_<provider>` and `api_slots` (--resources or
# a profile's `resources:`) bound the units at once inside it, as they bound jobs elsewhere;
# each run's rate limits hold as before (dualcog.inference.budget). Sharded runs keep their
# infer_shard jobs (rules/shards.smk).
# The helpers (API_RUNS, api_plan, API_CAPS) are in rules/cluster.smk.


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
            settings={
                name: answer_settings(model_by_name(config, name)) for name in API_RUNS
            },
            media_store=config["media"]["store"],
            cache_dir=config["cache_dir"],
        script:
            "../scripts/infer_api.py"

    # api_jobs: local (rules/cluster.smk): it runs where Snakemake runs, e.g. a login node.
    if config.get("api_jobs", "cluster") == "local":

        localrules:
            infer_api,
