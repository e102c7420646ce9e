"""Snakemake adapter: prompts + response cache -> results/estimate/ and the printed estimate."""

import sys
from pathlib import Path

from dualcog import atomic
from dualcog.config import validate_config
from dualcog.estimate import estimate, estimate_lines
from dualcog.runtime import log, run_step
from dualcog.schemas import read_arrow


def main(sm):
    config = validate_config(sm.config, "the workflow configuration")
    prompts = {
        model: {
            task: read_arrow(path, ["sample_id", "request_key"]).to_pandas()
            for task, path in tasks.items()
        }
        for model, tasks in sm.params.plan.items()
    }
    frame = estimate(config["models"], prompts, sm.params.cache_dir)
    lines = estimate_lines(frame)
    folder = Path(sm.params.folder)
    atomic.write_text(folder / "estimate.csv", frame.to_csv(index=False, float_format="%.6g"))
    atomic.write_text(folder / "estimate.txt", "\n".join(lines) + "\n")
    log.info("wrote %s and %s", folder / "estimate.csv", folder / "estimate.txt")
    print("\n".join(lines), file=sys.stdout, flush=True)


run_step(snakemake, main)  # noqa: F821
