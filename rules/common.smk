import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from dualcog.backends import backend_of, input_files
from dualcog.config import (
    answer_settings,
    is_video_task,
    model_by_name,
    model_tasks,
    validate_config,
)
from dualcog.ingest import find_manifests
from dualcog.preflight import require_ready
from dualcog.prompts.render import video_mode_name
from dualcog.repeats import repeat_sets
from dualcog.stats import comparison_pairs
from dualcog.stamp import STAGE_VERSIONS, model_entry
from dualcog.serving.facts import facts_path as served_facts_path
from dualcog.serving.facts import frames_path as served_frames_path
from dualcog.serving.server import served_groups
from dualcog.sharding import shard_count
from dualcog.tables.catalog import table_names, table_spec
from dualcog.tasks import IMAGE_TASKS, VIDEO_TASKS
from dualcog.versions import (
    EXPLORER_VERSION,
    INGEST_VERSION,
    PARSER_VERSION,
    PROTOCOL_REVISION,
    RENDER_VERSION,
    SCORER_VERSION,
    TABLES_VERSION,
    PLOTS_VERSION,
    STATS_VERSION,
)

CONFIG_SOURCE = (
    ", ".join(map(str, workflow.overwrite_configfiles)) or "config/config.yaml"
)
config = validate_config(config, CONFIG_SOURCE)


def profile_resource_settings():
    """Raw resource values of the profile and command line (setting -> text)."""
    settings = workflow.resource_settings
    found = {}
    if settings.default_resources is not None:
        for arg in settings.default_resources.args or []:
            name, _, value = arg.partition("=")
            found[f"default-resources {name}"] = value
    for rule_name, resources in (settings.overwrite_resources or {}).items():
        for name, resource in resources.items():
            found[f"set-resources {rule_name}:{name}"] = getattr(
                resource, "raw", resource
            )
    return found


# Before any job, a dry run included: every missing variable, replay file or data problem.
require_ready(config, CONFIG_SOURCE, profile_resource_settings())


def servers_start_here():
    """Served models' jobs start here, in this environment: a local run without --sdm conda
    (called from onstart, which dry runs skip)."""
    from snakemake.settings.types import DeploymentMethod

    methods = workflow.deployment_settings.deployment_method
    return workflow.local_exec and DeploymentMethod.CONDA not in methods


MODELS = [m["name"] for m in config["models"]]
TASKS = config["tasks"]
SERVED_GROUPS = served_groups(config["models"])
SERVED_RUNS = [run for group in SERVED_GROUPS for run in group.runs]
UNSERVED_RUNS = [m for m in MODELS if m not in SERVED_RUNS]
# Replayed and built-in runs: one job per run answers all of its tasks (replay: its recorded
# files read once; the baselines: milliseconds of work after a process start-up). Sharded
# ones are split like any other run.
PER_RUN_RUNS = [
    m["name"]
    for m in config["models"]
    if backend_of(m).run_per_model
    and m["name"] in UNSERVED_RUNS
    and shard_count(m) == 1
]
# Runs the `infer` rule handles (one job per run and task); served runs have their own rules.
INFER_RUNS = [m for m in UNSERVED_RUNS if m not in PER_RUN_RUNS]
IMAGE_TASKS_ON = [t for t in TASKS if t in IMAGE_TASKS]
VIDEO_TASKS_ON = [t for t in TASKS if t in VIDEO_TASKS]
COMPARE_PAIRS = comparison_pairs(config)
# Repeat sets (`repeats: k`, dualcog.repeats): set name -> its runs (those selected).
REPEAT_SETS = repeat_sets(config["models"])
REPEAT_SIZES = {
    m["repeat_of"]: m["repeats"] for m in config["models"] if m.get("repeat_of")
}


def runs_of(name):
    """The runs behind a name of the tables and `compare`: a repeat set's, or the run."""
    return REPEAT_SETS.get(name, [name])


def compare_display_names():
    """Name -> label of every run and repeat set (a set's label as configured)."""
    names = {m["name"]: m.get("display_name") or m["name"] for m in config["models"]}
    for m in config["models"]:
        if m.get("repeat_of"):
            names[m["repeat_of"]] = m.get("repeat_label") or m["repeat_of"]
    return names


wildcard_constraints:
    model="|".join(re.escape(m) for m in MODELS),
    task="|".join(TASKS),
    vmode=r"video_url|frames\d+",


def names_regex(names):
    """A wildcard constraint matching exactly `names` (nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


_MANIFEST_FILES = []


def manifest_files():
    """The manifests under the data root, found in one walk of its tree per Snakemake call
    (the rules ingest, stamp and explorer all ask)."""
    if not _MANIFEST_FILES:
        _MANIFEST_FILES.extend(str(m.path) for m in find_manifests(config["data_root"]))
    return list(_MANIFEST_FILES)


def model_video_mode(name):
    model = model_by_name(config, name)
    return video_mode_name(model["video_mode"], model["video_frames"])


def used_video_modes():
    return sorted(
        {
            model_video_mode(m["name"])
            for m in config["models"]
            if any(is_video_task(t) for t in model_tasks(config, m))
        }
    )


def prompts_path(run, task):
    """The prompts file a run's jobs read for one request kind (video: its video mode's)."""
    if is_video_task(task):
        return f"results/prompts/{task}.{model_video_mode(run)}.parquet"
    return f"results/prompts/{task}.parquet"


def prompts_for(wildcards):
    return prompts_path(wildcards.model, wildcards.task)


def prepared_media(run, tasks):
    """The prepared media a run's requests on `tasks` read from the store: none unless its
    backend sends media (replayed and built-in runs never trigger media preparation)."""
    if not backend_of(model_by_name(config, run)).sends_media:
        return []
    paths = {"results/media/images.parquet"}
    paths.update(
        f"results/media/videos.{model_video_mode(run)}.parquet"
        for task in tasks
        if is_video_task(task)
    )
    return sorted(paths)


def media_for(wildcards):
    return prepared_media(wildcards.model, [wildcards.task])


def sampled_frames(wildcards):
    """`frames` mode: the sampled frames' timestamps are part of the prompt text."""
    if wildcards.vmode == "video_url":
        return {}
    return {"videos": f"results/media/videos.{wildcards.vmode}.parquet"}


def infer_settings(wildcards):
    """Answer-deciding settings of one (model, task) job: a change reruns exactly it."""
    settings = answer_settings(model_by_name(config, wildcards.model))
    if not is_video_task(wildcards.task):
        settings.pop("video_mode", None)
        settings.pop("video_frames", None)
    return settings


def replay_sources(wildcards):
    """Files the backend reads (its `input_field`: a replayed run's response files) are
    inputs: editing one reruns exactly its jobs."""
    return input_files(model_by_name(config, wildcards.model))


# A scored run's artifacts (dualcog.evaluate.ScoredRunPaths): written by rule `score`, or by
# the job that answers a run answered one job per run.
SCORED_RUN_OUTPUTS = dict(
    parsed="results/parsed/{model}.parquet",
    run="results/parsed/{model}.run.json",
    outcomes="results/parsed/{model}.outcomes.parquet",
    facts="results/parsed/{model}.facts.parquet",
    scores="results/scores/{model}.parquet",
    metrics="results/metrics/by_model/{model}.parquet",
    intervals="results/metrics/intervals_by_model/{model}.parquet",
)


def scoring_params():
    """The settings a scored run depends on (a change reruns its job), and the run's box
    scale."""
    return dict(
        bbox_scale=lambda wc: model_by_name(config, wc.model).get("bbox_scale"),
        parser_version=PARSER_VERSION,
        scorer_version=SCORER_VERSION,
        stats_version=STATS_VERSION,
        bootstrap=config["bootstrap"],
    )


def per_run_groups():
    """Runs answered one job per run, by their task list (in registry order)."""
    groups = {}
    for name in PER_RUN_RUNS:
        tasks = tuple(model_tasks(config, model_by_name(config, name)))
        groups.setdefault(tasks, []).append(name)
    return groups


def per_run_rule_name(tasks):
    """`infer_run` for runs of every task of the workflow, else named by the run's tasks."""
    if set(tasks) == set(TASKS):
        return "infer_run"
    return "infer_run_" + "_".join(tasks)


def all_backend_inputs():
    """Every file a configured backend reads (the stamp digests them)."""
    return sorted({p for m in config["models"] for p in input_files(m)})


def sent_responses():
    """The RESPONSES files of the runs that post requests: the stamp digests their request
    records (PROTOCOL §11.5)."""
    return [
        f"results/responses/{m['name']}/{task}.parquet"
        for m in config["models"]
        if backend_of(m).calls_api
        for task in model_tasks(config, m)
    ]


def stamp_models(names=None):
    """Per-model stamp entries (answer-settings digest, bbox_scale, backend input files)."""
    return {
        m["name"]: model_entry(m)
        for m in config["models"]
        if names is None or m["name"] in names
    }


def served_facts_of(wildcards):
    """A served run's recorded server facts (its stamp entry and explorer page show them)."""
    return (
        [served_facts_path(wildcards.model)] if wildcards.model in SERVED_RUNS else []
    )


def responses_of(wildcards):
    model = model_by_name(config, wildcards.model)
    return [
        f"results/responses/{wildcards.model}/{task}.parquet"
        for task in model_tasks(config, model)
    ]


def table_outputs():
    formats = config["tables"]["formats"]
    names = table_names(bool(IMAGE_TASKS_ON), bool(VIDEO_TASKS_ON))
    paths = [f"results/tables/{name}.{fmt}" for name in names for fmt in formats]
    if "csv" in formats:  # CSV has no room for a stamp: a sidecar carries it
        paths += [f"results/tables/{name}.stamp.json" for name in names]
    return paths


def explorer_outputs():
    return [f"results/explorer/{m}.html" for m in MODELS]


# Tables and leaderboard: optional inputs from other rule files, report flags.
OPTIONAL_RESULT_INPUTS = {
    "intervals": "results/metrics/intervals.parquet",
    "stamp": "results/stamp.json",
}


def optional_result_inputs(wildcards):
    """The optional inputs some rule of this workflow produces (none when no rule does)."""
    produced = {str(path) for rule in workflow.rules for path in rule.output}
    return {k: v for k, v in OPTIONAL_RESULT_INPUTS.items() if v in produced}


def report_format():
    """The one format of each table shown in the Snakemake report."""
    formats = config["tables"]["formats"]
    return "html" if "html" in formats else formats[0]


def table_report_outputs():
    """table_outputs(), the report's format of each flagged for `snakemake --report`."""
    shown = report_format()
    outputs = []
    for path in table_outputs():
        name, fmt = Path(path).name.split(".", 1)
        if fmt == shown:
            path = report(
                path,
                caption=f"../report/tables/{name}.rst",
                category="Tables",
                subcategory=table_spec(name).heading,
                labels={"table": name, "format": fmt},
            )
        outputs.append(path)
    return outputs


TABLE_MODELS = [
    {
        k: m.get(k)
        for k in (
            "name",
            "display_name",
            "group",
            "reasoning_only",
            "main_table",
            "backend",
            # a repeat set's runs are one row of the tables (dualcog.tables.repeats)
            "repeat",
            "repeat_of",
            "repeats",
            "repeat_label",
        )
    }
    for m in config["models"]
]


def stats_outputs():
    return [
        "results/metrics/intervals.parquet",
        *(
            f"results/compare/{a}__vs__{b}.{ext}"
            for a, b in COMPARE_PAIRS
            for ext in ("parquet", "md")
        ),
    ]


def plot_names():
    names = ["cognition_balance", "by_difficulty"]
    if IMAGE_TASKS_ON:
        names = ["answer_vs_grounding", *names, "audit_gains"]
    return names


def plot_outputs():
    return [
        f"results/plots/{name}.{fmt}" for name in plot_names() for fmt in ("png", "svg")
    ]


def all_outputs():
    return [
        "results/stamp.json",
        "results/metrics/metrics.parquet",
        *table_outputs(),
        "results/leaderboard.html",
        *stats_outputs(),
        *plot_outputs(),
        *explorer_outputs(),
        # MLflow tracking only where configured (rules/integrations.smk).
        *(["results/exports/mlflow_runs.json"] if config.get("mlflow") else []),
    ]


def stamp_input(wildcards):
    """Only the stamp: the tables do not show the bootstrap intervals (the leaderboard does)."""
    return {k: v for k, v in optional_result_inputs(wildcards).items() if k == "stamp"}


# USD per million tokens of the runs that give them (they change dollars, never answers).
MODEL_PRICES = {m["name"]: m["prices"] for m in config["models"] if m.get("prices")}


def estimate_plan():
    """Run name -> request kind -> the prompts file its requests are built from."""
    return {
        m["name"]: {t: prompts_path(m["name"], t) for t in model_tasks(config, m)}
        for m in config["models"]
    }


# The exports (rules/integrations.smk).
def export_models():
    """What the exports say of each model run (its identity, not its settings)."""
    keys = ("name", "display_name", "backend", "request_model", "group")
    return [{k: m.get(k) for k in keys} for m in config["models"]]


def export_dataset_id():
    """The Hub dataset the results are about: `exports.dataset_id`, else the download's repo."""
    exports = config.get("exports") or {}
    download = config.get("download") or {}
    return exports.get("dataset_id") or download.get("repo") or "Lozumi/UAV-DualCog"
