# UAV-DualCog evaluation workflow: ingest -> render -> infer -> parse and score -> tables.
# Rules are split by phase under rules/; the library src/dualcog/ does the work.


from pathlib import Path

from dualcog.config import read_config_file

# The demo's settings apply only when no --configfile is given: a user's config file is used on
# its own and never inherits the demo's data or models (docs/configuration.md).
if not workflow.overwrite_configfiles:
    if Path("config/config.yaml").is_file():
        # Snakemake's reader names neither the line nor the column of a YAML error; ours does.
        read_config_file("config/config.yaml")

    configfile: "config/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
include: "rules/download.smk"
include: "rules/ingest.smk"
include: "rules/render.smk"
include: "rules/cluster.smk"
include: "rules/api.smk"
include: "rules/inference.smk"
include: "rules/shards.smk"
include: "rules/serve.smk"
include: "rules/score.smk"
include: "rules/tables.smk"
include: "rules/stats.smk"
include: "rules/plots.smk"
include: "rules/stamp.smk"
include: "rules/explorer.smk"
include: "rules/integrations.smk"


# A report shows one config's run only: refused when results/ were written by another config.
from dualcog.outputs import check_report_config, report_requested

if report_requested(sys.argv):
    check_report_config(Path("results/stamp.json"), MODELS, CONFIG_SOURCE)


rule all:
    default_target: True
    input:
        all_outputs(),


# A served model's vLLM is checked here, before any job, where its server starts here.
# Outputs a person reads that this config does not make (an earlier config's) are removed.
onstart:
    from dualcog.outputs import remove_foreign_outputs, removed_text
    from dualcog.preflight import require_servers

    removed = remove_foreign_outputs(Path("results"), all_outputs())
    if removed:
        print(removed_text(removed), file=sys.stderr)
    if servers_start_here():
        require_servers(config, CONFIG_SOURCE)


# Models whose requests failed, the count of each error type and what to type next; after a
# success also each model's coverage and unanswered requests, and where the outputs are.
onsuccess:
    import sys
    from dualcog.inference.outcome import print_run_summary
    from dualcog.summary import print_final_summary
    from dualcog.usage import run_usage_lines

    print_run_summary(config)
    print_final_summary(config, tables=table_outputs())
    for line in run_usage_lines(config):  # requests, tokens and dollars per model
        print(line, file=sys.stderr)


onerror:
    from dualcog.inference.outcome import print_run_summary

    print_run_summary(config)
