from dualcog.download import DEFAULT_INTO, record_path


def download_folder():
    return Path((config.get("download") or {}).get("into", DEFAULT_INTO))


def download_section():
    """The download section with the revision in effect (`--config revision=` wins), so that
    giving it on the command line or in the file is the same to Snakemake's rerun triggers.
    """
    section = config.get("download") or {}
    return {**section, "revision": config.get("revision") or section.get("revision")}


def download_record():
    """The download's verification record, as an input of the rules that read the data root
    when it is the download's folder: ingest then reads only files checked against the Hub.
    """
    if Path(config["data_root"]).resolve() == download_folder().resolve():
        return [str(record_path(download_folder()))]
    return []


# The release from the Hugging Face Hub: what the selected tasks and scenes read, at the
# pinned revision, verified (docs/reproducing.md). Runs where Snakemake runs: it needs the
# network.
rule download:
    output:
        str(record_path(download_folder())),
    log:
        "results/logs/download.log",
    localrule: True
    conda:
        "../envs/dualcog.yaml"
    params:
        download=download_section(),
        tasks=TASKS,
    script:
        "../scripts/download.py"
