from dualcog.download import (
    download_folder,
    download_params,
    download_record,
    record_path,
)


# The release from the Hugging Face Hub: what the selected tasks and scenes read, at the
# pinned revision, verified (docs/reproducing.md). Runs where Snakemake runs: it needs the
# network. Ingest and the stamp take its record as an input when data_root is its folder.
rule download:
    output:
        str(record_path(download_folder(config))),
    log:
        "results/logs/download.log",
    localrule: True
    conda:
        "../envs/dualcog.yaml"
    params:
        download=download_params(config),
        tasks=TASKS,
    script:
        "../scripts/download.py"
