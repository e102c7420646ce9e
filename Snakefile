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
include: "rules/stamp.smk"
include: "rules/explorer.smk"


rule all:
    default_target: True
    input:
        all_outputs(),
