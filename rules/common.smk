import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(workflow.basedir) / "src"))

from dualcog.config import (
    answer_settings,
    is_video_task,
    model_by_name,
    model_tasks,
    validate_config,
)
from dualcog.ingest import find_manifests
from dualcog.preflight import require_ready
from dualcog.render import video_mode_name
from dualcog.serving import served_groups
from dualcog.tasks import IMAGE_TASKS, VIDEO_TASKS
from dualcog.versions import (
    INGEST_VERSION,
    PARSER_VERSION,
    RENDER_VERSION,
    SCORER_VERSION,
    TABLES_VERSION,
)

CONFIG_SOURCE = (
    ", ".join(map(str, workflow.overwrite_configfiles)) or "config/config.yaml"
)
config = validate_config(config, CONFIG_SOURCE)
# Before any job, a dry run included: every missing variable, replay file or data problem.
require_ready(config, CONFIG_SOURCE)

MODELS = [m["name"] for m in config["models"]]
TASKS = config["tasks"]
SERVED_GROUPS = served_groups(config["models"])
SERVED_RUNS = [run for group in SERVED_GROUPS for run in group.runs]
# Runs the `infer` rule handles (one job per run and task); served runs have their own rules.
UNSERVED_RUNS = [m for m in MODELS if m not in SERVED_RUNS]
IMAGE_TASKS_ON = [t for t in TASKS if t in IMAGE_TASKS]
VIDEO_TASKS_ON = [t for t in TASKS if t in VIDEO_TASKS]


wildcard_constraints:
    model="|".join(re.escape(m) for m in MODELS),
    task="|".join(TASKS),
    vmode=r"video_url|frames\d+",


def names_regex(names):
    """A wildcard constraint matching exactly `names` (nothing when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def manifest_files():
    return [str(m.path) for m in find_manifests(config["data_root"])]


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


def prompts_for(wildcards):
    if is_video_task(wildcards.task):
        return f"results/prompts/{wildcards.task}.{model_video_mode(wildcards.model)}.parquet"
    return f"results/prompts/{wildcards.task}.parquet"


def infer_settings(wildcards):
    """Answer-deciding settings of one (model, task) job: a change reruns exactly it."""
    settings = answer_settings(model_by_name(config, wildcards.model))
    if not is_video_task(wildcards.task):
        settings.pop("video_mode", None)
        settings.pop("video_frames", None)
    return settings


def replay_sources(wildcards):
    """Replayed response files are inputs, so editing one reruns exactly its jobs."""
    model = model_by_name(config, wildcards.model)
    if model["backend"] != "replay":
        return []
    sources = model["replay"]
    return [sources] if isinstance(sources, str) else list(sources)


def responses_of(wildcards):
    model = model_by_name(config, wildcards.model)
    return [
        f"results/responses/{wildcards.model}/{task}.parquet"
        for task in model_tasks(config, model)
    ]


def table_outputs():
    formats = config["tables"]["formats"]
    names = ["audit", "audit_gains"]
    if IMAGE_TASKS_ON:
        names.append("image_main")
    if VIDEO_TASKS_ON:
        names.append("video_main")
    names.append("overall")
    return [f"results/tables/{name}.{fmt}" for name in names for fmt in formats]


def all_outputs():
    return ["results/metrics/metrics.parquet", *table_outputs()]
