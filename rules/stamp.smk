rule stamp:
    input:
        manifests=manifest_files(),
        backend_inputs=all_backend_inputs(),
        release=download_record(config),
        served=[served_facts_path(run) for run in SERVED_RUNS],
        responses=sent_responses(),
    output:
        "results/stamp.json",
    log:
        "results/logs/stamp.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        models=stamp_models(),
        data_root=lambda wildcards: config["data_root"],
        versions=STAGE_VERSIONS,
        protocol=PROTOCOL_REVISION,
    script:
        "../scripts/stamp.py"


# The manifests' digests, made once for the per-model explorer pages' stamps (each would
# otherwise hash every manifest again).
rule data_stamp:
    input:
        manifests=manifest_files(),
    output:
        "results/data_stamp.json",
    log:
        "results/logs/data_stamp.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        data_root=lambda wildcards: config["data_root"],
    script:
        "../scripts/data_stamp.py"
