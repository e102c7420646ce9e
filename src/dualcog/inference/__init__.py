"""Inference: turn rendered prompts into raw responses (schemas.RESPONSES).

Backends: `oracle`, `random`, `simulated` (offline, gold-aware), `replay` (responses read from
files) and `openai` (OpenAI-compatible Chat Completions with a crash-safe response cache).
"""

from dualcog.config import NON_ANSWER_KEYS
from dualcog.inference.cache import cache_key, cache_path, model_fingerprint
from dualcog.inference.common import split_mode
from dualcog.inference.media import media_data_uri, media_path
from dualcog.inference.request import FAMILY_MODE_BODIES, build_messages, request_settings
from dualcog.inference.runner import BACKENDS, replay_tasks, run_model

__all__ = [
    "BACKENDS",
    "FAMILY_MODE_BODIES",
    "NON_ANSWER_KEYS",
    "build_messages",
    "cache_key",
    "cache_path",
    "media_data_uri",
    "media_path",
    "model_fingerprint",
    "replay_tasks",
    "request_settings",
    "run_model",
    "split_mode",
]
