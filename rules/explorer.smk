rule explorer_media:
    input:
        samples="results/benchmark/samples.parquet",
    output:
        media=directory("results/explorer/media"),
        index="results/explorer/media.parquet",
    log:
        "results/logs/explorer_media.log",
    conda:
        "../envs/dualcog.yaml"
    threads: 2
    params:
        version=EXPLORER_VERSION,
    script:
        "../scripts/explorer_media.py"


rule explorer_samples:
    input:
        samples="results/benchmark/samples.parquet",
        media="results/explorer/media.parquet",
    output:
        cards=directory("results/explorer/samples"),
    log:
        "results/logs/explorer_samples.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        version=EXPLORER_VERSION,
    script:
        "../scripts/explorer_samples.py"


rule explorer:
    input:
        samples="results/benchmark/samples.parquet",
        cards="results/explorer/samples",
        parsed="results/parsed/{model}.parquet",
        outcomes="results/parsed/{model}.outcomes.parquet",
        scores="results/scores/{model}.parquet",
        responses=responses_of,
        media="results/explorer/media.parquet",
        data_stamp="results/data_stamp.json",
        replay=replay_sources,
        served=served_facts_of,
    output:
        page="results/explorer/{model}.html",
        data=directory("results/explorer/data/{model}"),
    log:
        "results/logs/explorer/{model}.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        stamp=lambda wc: stamp_models([wc.model])[wc.model],
        label=lambda wc: model_by_name(config, wc.model).get("display_name") or wc.model,
        models=MODELS,
        data_root=lambda wildcards: config["data_root"],
        version=EXPLORER_VERSION,
    script:
        "../scripts/explorer.py"
