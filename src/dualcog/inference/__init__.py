"""Inference: turn rendered prompts into raw responses (schemas.RESPONSES).

Backends and what each needs are declared in `dualcog.backends`; their runners live here,
those of API backends as transports of the request engine (`dualcog.inference.engine`).
"""

from dualcog.inference.cache import answer_settings_json, cache_key, cache_path
from dualcog.inference.media import media_data_uri, media_path
from dualcog.inference.request import build_messages, request_settings
from dualcog.inference.runner import run_model, run_per_model
from dualcog.switches import split_mode

__all__ = [
    "build_messages",
    "cache_key",
    "cache_path",
    "media_data_uri",
    "media_path",
    "answer_settings_json",
    "request_settings",
    "run_model",
    "run_per_model",
    "split_mode",
]
