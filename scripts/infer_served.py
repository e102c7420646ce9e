"""Snakemake adapter: start one served model's server, run all its (run, task) jobs, stop it."""

from pathlib import Path

from dualcog.config import model_by_name
from dualcog.inference import run_model
from dualcog.inference.outcome import InferenceFailed, record_outcome
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, read_frame, write_table
from dualcog.serving import ManagedServer, exit_on_signals, serve_spec


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    plan = sm.params.plan  # [{run, task, prompts, output}] in input/output order
    runs = {item["run"]: model_by_name(config, item["run"]) for item in plan}
    spec = serve_spec(next(iter(runs.values())))
    samples = read_frame(sm.input.samples)
    failed = []
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
        for item in plan:
            model = {
                **runs[item["run"]],
                "api_base": server.api_base,
                "api_key": server.api_key,  # per launch; scrubbed like any key
                "request_model": spec.served_name,
            }
            prompts = read_frame(item["prompts"])
            task_samples = samples[samples["task"] == item["task"]]
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
            log.info("status counts: %s", responses["status"].value_counts().to_dict())
            outcome = record_outcome(model, item["task"], responses, sm.params.cache_dir)
            if outcome is not None and outcome.failed:
                failed.append(outcome.failure_message())
                continue
            write_table(responses, RESPONSES, item["output"])
    log.info("server stopped")
    if failed:
        # Answers received are cached: a plain rerun sends only the failed requests.
        raise InferenceFailed("; ".join(failed))


run_step(snakemake, main)  # noqa: F821
