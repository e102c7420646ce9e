# Plots of the results (PNG for the report and the page, SVG for papers).


rule plots:
    input:
        metrics="results/metrics/metrics.parquet",
        intervals="results/metrics/intervals.parquet",
    output:
        [
            report(
                f"results/plots/{name}.png",
                caption=f"../report/{name}.rst",
                category="Plots",
            )
            for name in plot_names()
        ],
        [f"results/plots/{name}.svg" for name in plot_names()],
    log:
        "results/logs/plots.log",
    conda:
        "../envs/dualcog.yaml"
    params:
        names=plot_names(),
        models=[
            {
                k: m.get(k)
                for k in ("name", "display_name", "group", "reasoning_only", "backend")
            }
            for m in config["models"]
        ],
        version=PLOTS_VERSION,
    script:
        "../scripts/plots.py"
