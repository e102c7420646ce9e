# UAV-DualCog evaluation workflow: ingest -> render -> infer -> parse -> score -> tables.
# Rules are split by phase under rules/; the library src/dualcog/ does the work.


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/ingest.smk"
include: "rules/render.smk"
include: "rules/inference.smk"
include: "rules/parse.smk"
include: "rules/score.smk"
include: "rules/tables.smk"


rule all:
    default_target: True
    input:
        all_outputs(),


# Models whose requests failed, the count of each error type and what to type next.
onsuccess:
    from dualcog.inference.outcome import print_run_summary

    print_run_summary(config)


onerror:
    from dualcog.inference.outcome import print_run_summary

    print_run_summary(config)
