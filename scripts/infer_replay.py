"""Snakemake adapter: one run of a backend that runs per model (replay: its recorded files)
-> its responses for every task. Arrow in and out: the job never imports pandas."""

# ruff: noqa: E402
from dualcog.runtime import import_pyarrow_without_numpy, log, progress_logger, run_step

# Before anything imports pyarrow (so the imports below come after it): this job's work
# never converts numpy values (why, and what it saves: dualcog.runtime).
import_pyarrow_without_numpy()

from collections import Counter

from dualcog.config import model_by_name
from dualcog.inference import run_per_model_tables
from dualcog.schemas import RESPONSES, read_arrow, write_table

# What a response row takes from its prompt (dualcog.inference.rows.response_row): the texts
# and media lists are never read, let alone converted to Python values.
PROMPT_COLUMNS = ["sample_id", "task", "request_key"]


def main(sm):
    config = sm.config  # validated, defaults and routes filled, when the Snakefile was read
    model = model_by_name(config, sm.wildcards.model)
    tasks = list(sm.params.tasks)
    prompts = {
        task: read_arrow(path, columns=PROMPT_COLUMNS)
        for task, path in zip(tasks, sm.input.prompts, strict=True)
    }
    log.info(
        "%s: replaying %d requests of %s", model["name"], sum(map(len, prompts.values())),
        ", ".join(tasks),
    )  # fmt: skip
    responses = run_per_model_tables(model, prompts, progress=progress_logger())
    for task, output in zip(tasks, sm.output, strict=True):
        table = responses[task]
        counts = Counter(table.column("status").to_pylist()).most_common()
        log.info("%s: status counts %s", task, dict(counts))
        write_table(table, RESPONSES, output)


run_step(snakemake, main)  # noqa: F821
