rule infer:
    input:
        prompts=prompts_for,
        samples="results/benchmark/samples.parquet",
        replay=replay_sources,
        media=media_for,
    output:
        "results/responses/{model}/{task}.parquet",
    log:
        "results/logs/infer/{model}/{task}.log",
    wildcard_constraints:
        model=names_regex([name for name in INFER_RUNS if name not in API_RUNS]),
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


# Replayed and built-in runs: one job answers all of a run's tasks and scores them (one rule
# per distinct task list; a run's change reruns only its job).
for run_tasks, per_runs in per_run_groups().items():

    rule:
        name:
            per_run_rule_name(run_tasks)
        input:
            prompts=lambda wildcards, tasks=run_tasks: [
                prompts_path(wildcards.model, task) for task in tasks
            ],
            samples="results/benchmark/samples.parquet",
            pairs="results/benchmark/pairs.parquet",
            weights="results/benchmark/bootstrap_weights.parquet",
            replay=replay_sources,
        output:
            **SCORED_RUN_OUTPUTS,
            responses=[
                f"results/responses/{{model}}/{task}.parquet" for task in run_tasks
            ],
        log:
            "results/logs/infer/{model}/run.log",
        wildcard_constraints:
            model=names_regex(per_runs),
        conda:
            "../envs/dualcog.yaml"
        params:
            **scoring_params(),
            tasks=list(run_tasks),
            settings=lambda wildcards: answer_settings(
                model_by_name(config, wildcards.model)
            ),
        script:
            "../scripts/infer_run.py"
