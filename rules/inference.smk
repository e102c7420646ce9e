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
        model=names_regex(INFER_RUNS),
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


# Replayed runs: reading recorded files costs little per task, so one job answers all of a
# run's tasks (one rule per distinct task list; a run's change reruns only its job).
for replay_tasks, replay_runs in replay_groups().items():

    rule:
        name:
            replay_rule_name(replay_tasks)
        input:
            prompts=lambda wildcards, tasks=replay_tasks: [
                prompts_path(wildcards.model, task) for task in tasks
            ],
            replay=replay_sources,
        output:
            [f"results/responses/{{model}}/{task}.parquet" for task in replay_tasks],
        log:
            "results/logs/infer/{model}/replay.log",
        wildcard_constraints:
            model=names_regex(replay_runs),
        conda:
            "../envs/dualcog.yaml"
        params:
            tasks=list(replay_tasks),
            settings=lambda wildcards: answer_settings(
                model_by_name(config, wildcards.model)
            ),
        script:
            "../scripts/infer_replay.py"
