rule parse:
    input:
        samples="results/benchmark/samples.parquet",
        responses=responses_of,
    output:
        parsed="results/parsed/{model}.parquet",
        run="results/parsed/{model}.run.json",
        outcomes="results/parsed/{model}.outcomes.parquet",
        facts="results/parsed/{model}.facts.parquet",
    log:
        "results/logs/parse/{model}.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        bbox_scale=lambda wc: model_by_name(config, wc.model).get("bbox_scale"),
        version=PARSER_VERSION,
    script:
        "../scripts/parse.py"
