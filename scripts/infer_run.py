"""Snakemake adapter: one run of a backend that runs per model (replay: its recorded files;
the built-in baselines: the gold) -> its responses for every task. Arrow in and out."""

from collections import Counter

from dualcog.config import model_by_name
from dualcog.inference import run_per_model
from dualcog.runtime import log, progress_logger, run_step
from dualcog.schemas import RESPONSES, read_arrow, rows_of_tasks, write_table

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
    samples = None
    if getattr(sm.input, "samples", None):  # a gold-aware backend (Backend.reads_samples)
        samples = read_arrow(sm.input.samples)
        samples = rows_of_tasks(samples, tasks)
    log.info(
        "%s: answering %d requests of %s (backend %s)", model["name"],
        sum(map(len, prompts.values())), ", ".join(tasks), model["backend"],
    )  # fmt: skip
    responses = run_per_model(model, prompts, samples, progress=progress_logger())
    for task, output in zip(tasks, sm.output, strict=True):
        table = responses[task]
        counts = Counter(table.column("status").to_pylist()).most_common()
        log.info("%s: status counts %s", task, dict(counts))
        write_table(table, RESPONSES, output)


run_step(snakemake, main)  # noqa: F821
