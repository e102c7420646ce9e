rule prepare_images:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/media/images.parquet",
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    threads: 2
    log:
        "results/logs/prepare_images.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/prepare_images.py"


rule prepare_videos:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/media/videos.{vmode}.parquet",
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    threads: 2
    log:
        "results/logs/prepare_videos.{vmode}.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/prepare_videos.py"


rule render_image_prompts:
    input:
        samples="results/benchmark/samples.parquet",
        images="results/media/images.parquet",
    output:
        "results/prompts/{task}.parquet",
    wildcard_constraints:
        task="|".join(IMAGE_TASKS),
    params:
        version=RENDER_VERSION,
    log:
        "results/logs/render/{task}.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/render.py"


rule render_video_prompts:
    input:
        samples="results/benchmark/samples.parquet",
        images="results/media/images.parquet",
        videos="results/media/videos.{vmode}.parquet",
    output:
        "results/prompts/{task}.{vmode}.parquet",
    wildcard_constraints:
        task="|".join(VIDEO_TASKS),
    params:
        version=RENDER_VERSION,
    log:
        "results/logs/render/{task}.{vmode}.log",
    conda:
        "../envs/dualcog.yaml"
    script:
        "../scripts/render.py"
