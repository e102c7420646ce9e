rule prepare_images:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/media/images.parquet",
    log:
        "results/logs/prepare_images.log",
    conda:
        "../envs/dualcog.yaml"
    threads: 2
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    script:
        "../scripts/prepare_images.py"


rule prepare_videos:
    input:
        "results/benchmark/samples.parquet",
    output:
        "results/media/videos.{vmode}.parquet",
    log:
        "results/logs/prepare_videos.{vmode}.log",
    conda:
        "../envs/dualcog.yaml"
    threads: 2
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    script:
        "../scripts/prepare_videos.py"


# Prompts carry the media keys (hashes of the source bytes), not the prepared files: only the
# jobs of models that send media (prepared_media in common.smk) wait on the two rules above.
rule render_image_prompts:
    input:
        samples="results/benchmark/samples.parquet",
    output:
        "results/prompts/{task}.parquet",
    log:
        "results/logs/render/{task}.log",
    wildcard_constraints:
        task="|".join(IMAGE_TASKS),
    conda:
        "../envs/dualcog.yaml"
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    script:
        "../scripts/render.py"


rule render_video_prompts:
    input:
        unpack(sampled_frames),
        samples="results/benchmark/samples.parquet",
    output:
        "results/prompts/{task}.{vmode}.parquet",
    log:
        "results/logs/render/{task}.{vmode}.log",
    wildcard_constraints:
        task="|".join(VIDEO_TASKS),
    conda:
        "../envs/dualcog.yaml"
    params:
        settings=config["media"],
        version=RENDER_VERSION,
    script:
        "../scripts/render.py"
