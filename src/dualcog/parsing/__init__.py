"""Response parsing in the three modes of docs/protocol.md §3: strict, compatible, legacy.

`parse_run` turns one model run's responses into the PARSED table; the per-response
functions below are the same rules, exposed for tests and diagnostics.
"""

from dualcog.parsing.compatible import (
    ImageRecovery,
    finish_image_compatible,
    parse_behavior_compatible,
    parse_image_compatible,
    parse_visibility_compatible,
    recover_image_compatible,
)
from dualcog.parsing.fields import BehaviorParse, ImageParse, VisibilityParse
from dualcog.parsing.jsontext import (
    NOT_JSON,
    compatible_candidate,
    first_balanced_array,
    first_balanced_object,
    first_fence_content,
    loads_json,
    remove_reasoning,
)
from dualcog.parsing.legacy import parse_image_legacy
from dualcog.parsing.modes import (
    parse_behavior_modes,
    parse_image_modes,
    parse_visibility_modes,
)
from dualcog.parsing.scale import RUN_SCALES, resolve_run_scale
from dualcog.parsing.strict import (
    parse_behavior_strict,
    parse_image_strict,
    parse_visibility_strict,
)
from dualcog.parsing.table import parse_run

__all__ = [
    "NOT_JSON",
    "RUN_SCALES",
    "BehaviorParse",
    "ImageParse",
    "ImageRecovery",
    "VisibilityParse",
    "compatible_candidate",
    "finish_image_compatible",
    "first_balanced_array",
    "first_balanced_object",
    "first_fence_content",
    "loads_json",
    "parse_behavior_compatible",
    "parse_behavior_modes",
    "parse_behavior_strict",
    "parse_image_compatible",
    "parse_image_legacy",
    "parse_image_modes",
    "parse_image_strict",
    "parse_run",
    "parse_visibility_compatible",
    "parse_visibility_modes",
    "parse_visibility_strict",
    "recover_image_compatible",
    "remove_reasoning",
    "resolve_run_scale",
]
