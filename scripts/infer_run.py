"""Snakemake adapter: one run of a backend that runs per model (replay: its recorded files;
the built-in baselines: the gold) -> its responses for every task, then their parses and
scores (dualcog.evaluate): one job, where a job per step would cost more than the work."""

from collections import Counter

import pyarrow as pa

from dualcog.backends import backend_of
from dualcog.config import model_by_name
from dualcog.evaluate import SAMPLE_COLUMNS, ScoredRunPaths, evaluate_run, write_scored_run
from dualcog.inference import run_per_model_tables
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, conformed, read_arrow, rows_of_tasks, write_table

# What a response row takes from its prompt (dualcog.inference.rows.response_row) and what
# the built-in baselines read (the options offered): the texts and media lists are never
# read, let alone converted to Python values.
PROMPT_COLUMNS = ["sample_id", "task", "request_key", "offered_option_ids"]


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    model = model_by_name(config, sm.wildcards.model)
    tasks = list(sm.params.tasks)
    prompts = {
        task: read_arrow(path, columns=PROMPT_COLUMNS)
        for task, path in zip(tasks, sm.input.prompts, strict=True)
    }
    gold_aware = backend_of(model).reads_samples
    samples = read_arrow(sm.input.samples, columns=None if gold_aware else SAMPLE_COLUMNS)
    log.info(
        "%s: answering %d requests of %s (backend %s)", model["name"],
        sum(map(len, prompts.values())), ", ".join(tasks), model["backend"],
    )  # fmt: skip
    responses = run_per_model_tables(
        model,
        prompts,
        rows_of_tasks(samples, tasks) if gold_aware else None,
        progress=progress_logger(),
    )
    for task, output in zip(tasks, sm.output.responses, strict=True):
        table = responses[task] = conformed(responses[task], RESPONSES)
        counts = Counter(table.column("status").to_pylist()).most_common()
        log.info("%s: status counts %s", task, dict(counts))
        write_table(table, RESPONSES, output)

    answered = pa.concat_tables([responses[task] for task in tasks])
    scored = evaluate_run(
        model["name"],
        answered,
        samples,
        read_arrow(sm.input.pairs),
        read_arrow(sm.input.weights),
        sm.params.bootstrap,
        sm.params.bbox_scale,
    )
    write_scored_run(scored, ScoredRunPaths.of(sm.output))


run_step(snakemake, main)  # noqa: F821
