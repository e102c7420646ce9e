# Results in the formats other tools read and the benchmark as a `datasets` folder (targets
# `exports` and `hf_dataset`, run when asked: docs/exports.md, docs/hf-dataset.md), and MLflow
# tracking when the config has an `mlflow:` block (then part of the default target:
# docs/mlflow.md). They need the `integrations` extra; the default run does not.


rule exports:
    input:
        stamp="results/stamp.json",
        samples="results/benchmark/samples.parquet",
        metrics=expand("results/metrics/by_model/{model}.parquet", model=MODELS),
        scores=expand("results/scores/{model}.parquet", model=MODELS),
        parsed=expand("results/parsed/{model}.parquet", model=MODELS),
        responses=[
            f"results/responses/{m['name']}/{task}.parquet"
            for m in config["models"]
            for task in model_tasks(config, m)
        ],
    output:
        hub=expand("results/exports/eval_results/{model}.yaml", model=MODELS),
        eee=directory("results/exports/every_eval_ever"),
    log:
        "results/logs/exports.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        models=export_models(),
        dataset_id=export_dataset_id(),
    script:
        "../scripts/exports.py"


rule hf_dataset:
    input:
        stamp="results/stamp.json",
        samples="results/benchmark/samples.parquet",
    output:
        card="results/exports/dataset/README.md",
        data=directory("results/exports/dataset/data"),
    log:
        "results/logs/hf_dataset.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        data_root=lambda wildcards: config["data_root"],
        repo=export_dataset_id(),
        embed_media=(config.get("exports") or {}).get("embed_media", False),
    script:
        "../scripts/hf_dataset.py"


# Reruns when the metrics, the stamp or the tables change (a new MLflow run each time).
rule mlflow_log:
    input:
        stamp="results/stamp.json",
        metrics=expand("results/metrics/by_model/{model}.parquet", model=MODELS),
        tables=table_outputs(),
    output:
        "results/exports/mlflow_runs.json",
    log:
        "results/logs/mlflow_log.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        settings=config.get("mlflow"),
        models=MODELS,
    script:
        "../scripts/mlflow_log.py"
