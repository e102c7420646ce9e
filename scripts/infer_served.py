"""Snakemake adapter: start one served model's server, run all its (run, task) jobs, stop it."""

from collections import Counter
from pathlib import Path

import pyarrow as pa

from dualcog.config import is_video_task, model_by_name
from dualcog.inference import run_model
from dualcog.inference.outcome import InferenceFailed, record_outcome
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, SERVED_FRAMES, read_arrow, rows_of_tasks, write_table
from dualcog.serving import facts as served_facts
from dualcog.serving.server import ManagedServer, exit_on_signals, serve_spec

FRAME_COLUMNS = ["sample_id", "task", "request_key", "media_keys", "media_kinds"]


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    plan = sm.params.plan  # [{run, task, prompts, output}] in input/output order
    runs = {item["run"]: model_by_name(config, item["run"]) for item in plan}
    spec = serve_spec(next(iter(runs.values())))
    samples = read_arrow(sm.input.samples)
    failed = []
    frames = {run: [] for run in runs}  # per run: the frames-mode requests' frames
    frame_times = {}  # videos index path -> {frame key: timestamp}
    with (
        exit_on_signals(),
        ManagedServer(
            spec, sm.log.server, label=sm.rule, pid_dir=Path(sm.log.server).parent
        ) as server,
    ):
        log.info(
            "server for %s: pid %d, %s (serves %s; log %s)",
            ", ".join(runs), server.pid, server.api_base, spec.served_name, sm.log.server,
        )  # fmt: skip
        reported, problem = server.reported_version()
        if problem:
            log.warning("%s: %s", sm.rule, problem)
        installed = served_facts.installed_vllm_version() if reported is None else None
        version = served_facts.version_fact(reported, problem, installed)
        log.info("vLLM %s (%s)", version["vllm_version"], version["vllm_version_source"])
        for item in plan:
            model = {
                **runs[item["run"]],
                "api_base": server.api_base,
                "api_key": server.api_key,  # per launch; scrubbed like any key
                "request_model": spec.served_name,
            }
            prompts = read_arrow(item["prompts"])
            index = item.get("frames_index")
            if index:
                if index not in frame_times:
                    rows = read_arrow(index, ["keys", "timestamps"]).to_pylist()
                    frame_times[index] = served_facts.frame_times(rows)
                frames[item["run"]] += served_facts.frame_rows(
                    prompts.select(FRAME_COLUMNS).to_pylist(), frame_times[index], index
                )
            task_samples = rows_of_tasks(samples, [item["task"]])
            log.info("%s on %s: %d requests", item["run"], item["task"], len(prompts))
            responses = run_model(
                model,
                prompts,
                task_samples,
                Path(sm.params.media_store),
                Path(sm.params.cache_dir),
                progress=progress_logger(),  # the engine's lines start with run/task already
            )
            # Errors caused by a server that died are the server's, not the model's.
            server.check_alive()
            statuses = responses.column("status").to_pylist()
            log.info("status counts: %s", dict(Counter(statuses).most_common()))
            outcome = record_outcome(model, item["task"], responses, sm.params.cache_dir)
            if outcome is not None and outcome.failed:
                failed.append(outcome.failure_message())
                continue
            write_table(responses, RESPONSES, item["output"])
    log.info("server stopped")
    for run, model in runs.items():
        tasks = [item["task"] for item in plan if item["run"] == run]
        facts = served_facts.run_facts(
            {**model, "request_model": spec.served_name},
            spec.argv(served_facts.PORT_PLACEHOLDER),
            spec.args,
            spec.env,
            version,
            video_tasks=any(is_video_task(t) for t in tasks),
            rows=frames[run],
            base=Path.cwd(),
        )
        served_facts.write_facts(facts, sm.params.records[run]["facts"])
        write_table(pa.Table.from_pylist(frames[run], SERVED_FRAMES), SERVED_FRAMES,
                    sm.params.records[run]["frames"])  # fmt: skip
    if failed:
        # Answers received are cached: a plain rerun sends only the failed requests.
        raise InferenceFailed("; ".join(failed))


run_step(snakemake, main)  # noqa: F821
