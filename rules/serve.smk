# Models with a `serve:` block: one job per served model starts its server (vllm serve), runs
# all of its runs and tasks through it, and stops it (docs/configuration.md, "Managed servers").


def served_plan(group):
    return [
        {
            "run": run,
            "task": task,
            "prompts": prompts_path(run, task),
            "output": f"results/responses/{run}/{task}.parquet",
            # frames mode: the prepared frames' timestamps, recorded per request
            "frames_index": (
                f"results/media/videos.{model_video_mode(run)}.parquet"
                if is_video_task(task)
                and model_by_name(config, run)["video_mode"] == "frames"
                else None
            ),
        }
        for run in group.runs
        for task in model_tasks(config, model_by_name(config, run))
    ]


for served in SERVED_GROUPS:

    rule:
        name:
            served.rule_name
        input:
            prompts=sorted({item["prompts"] for item in served_plan(served)}),
            samples="results/benchmark/samples.parquet",
            media=sorted(
                {
                    path
                    for run in served.runs
                    for path in prepared_media(
                        run, model_tasks(config, model_by_name(config, run))
                    )
                }
            ),
        output:
            responses=[item["output"] for item in served_plan(served)],
            # what each run saw: server version, launch arguments, chat template, video
            facts=[served_facts_path(run) for run in served.runs],
            frames=[served_frames_path(run) for run in served.runs],
        log:
            infer=f"results/logs/infer/{served.key}.served.log",
            server=f"results/logs/serve/{served.key}.log",
        conda:
            "../envs/vllm.yaml"
        resources:
            gpu=served.gpus,
        params:
            plan=served_plan(served),
            records={
                run: {
                    "facts": served_facts_path(run),
                    "frames": served_frames_path(run),
                }
                for run in served.runs
            },
            settings={
                run: answer_settings(model_by_name(config, run)) for run in served.runs
            },
            media_store=config["media"]["store"],
            cache_dir=config["cache_dir"],
        script:
            "../scripts/infer_served.py"
