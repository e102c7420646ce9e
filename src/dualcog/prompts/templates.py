"""Prompt templates for samples whose manifest stores no prompts (docs/upstream_format.md §4).

The landmark_position pair is the seed page's template, verbatim. The other five follow its
[TASK]/[INPUT]/[OUTPUT]/[NOTE] layout and state the canonical JSON contract of docs/protocol.md §2.
Placeholders are written `{{name}}` as on the seed page; `options_text` is derived from the
`options` variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from dualcog.errors import DualCogError

IMAGE_CONTRACT = '{"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.2,0.3,0.4]}'
BEHAVIOR_CONTRACT = (
    '{"answers":[{"option_id":"A","intervals_sec":[[0.0,1.2]]},'
    '{"option_id":"C","intervals_sec":[[3.4,5.0]]}]}'
)
VISIBILITY_CONTRACT = '{"visible_count":2,"visible_intervals_sec":[[0.0,9.1],[17.7,26.8]]}'

# The five images of a future_observation request are the reference then candidates A-D.
FUTURE_OBSERVATION_OPTIONS: tuple[dict[str, str], ...] = (
    {"option_id": "A", "label": "Image 2"},
    {"option_id": "B", "label": "Image 3"},
    {"option_id": "C", "label": "Image 4"},
    {"option_id": "D", "label": "Image 5"},
)

_IMAGE_OUTPUT = (
    "[OUTPUT]: 1. Return exactly one valid JSON object. "
    "2. Do not output markdown, explanation, or extra text. "
    "3. Use exactly one option_id from the user prompt. "
    "4. The bounding box must use normalized [x1,y1,x2,y2] coordinates. "
    f"5. Strictly follow this JSON schema: {IMAGE_CONTRACT}"
)

SYSTEM_TEMPLATES: dict[str, str] = {
    # Verbatim from the seed page.
    "landmark_position": (
        "[TASK]: You are a UAV agent. Compare a reference view including a landmark and your "
        "current first-person view. Decide your position relative to the landmark. "
        "[INPUT]: - You are given two first-person view images. - Image 1 is the reference "
        "view, showing the landmark and its bounding box. - Image 2 is your current view. "
        "- Image 1 tells you which facade of the landmark is visible in the landmark-centric "
        "coordinate frame. - The user prompt gives the question and answer options. "
        f"{_IMAGE_OUTPUT} "
        "[NOTE]: 1. Decide your position relative to the landmark in image 2. 2. Also "
        "localize the landmark in image 2. 3. The visible facade in image 1 defines the "
        "landmark's forward-facing reference."
    ),
    "future_observation": (
        "[TASK]: You are a UAV agent. Compare a reference view including a landmark with four "
        "candidate first-person views. Predict which view you will observe after performing "
        "the given behavior around the landmark. "
        "[INPUT]: - You are given five first-person view images. - Image 1 is the reference "
        "view, showing the landmark and its bounding box. - Images 2-5 are the candidate "
        "future views A-D: image 2 is option A, image 3 is option B, image 4 is option C and "
        "image 5 is option D. - Image 1 tells you which facade of the landmark is visible in "
        "the landmark-centric coordinate frame. - The user prompt gives the behavior and the "
        "answer options. "
        f"{_IMAGE_OUTPUT} "
        "[NOTE]: 1. Start from the viewpoint of image 1 and apply the behavior. 2. Also "
        "localize the landmark in the candidate image you select. 3. The visible facade in "
        "image 1 defines the landmark's forward-facing reference."
    ),
    "self_position": (
        "[TASK]: You are a UAV agent. Compare a reference view including a landmark and your "
        "current first-person view. Decide where the landmark is relative to yourself. "
        "[INPUT]: - You are given two first-person view images. - Image 1 is the reference "
        "view, showing the landmark and its bounding box. - Image 2 is your current view. "
        "- Image 1 identifies the landmark; directions are judged in your own egocentric "
        "frame. - The user prompt gives the question and answer options. "
        f"{_IMAGE_OUTPUT} "
        "[NOTE]: 1. Decide the direction of the landmark relative to your current heading in "
        "image 2. 2. Also localize the landmark in image 2. 3. Front means straight ahead of "
        "you, Left means on your left-hand side, and so on."
    ),
    "action_decision": (
        "[TASK]: You are a UAV agent. Compare a reference view including a landmark and your "
        "current first-person view. Decide which action brings you toward the landmark. "
        "[INPUT]: - You are given two first-person view images. - Image 1 is the reference "
        "view, showing the landmark and its bounding box. - Image 2 is your current view. "
        "- Image 1 identifies the goal landmark; actions are expressed in your own egocentric "
        "frame. - The user prompt gives the question and answer options. "
        f"{_IMAGE_OUTPUT} "
        "[NOTE]: 1. Choose the next action that best moves you toward the landmark from your "
        "current pose in image 2. 2. Also localize the landmark in image 2. 3. Judge the "
        "action from image 2, not from image 1."
    ),
    "behavior": (
        "[TASK]: You are a UAV agent. Watch a first-person video of your own flight around a "
        "landmark and recognize every behavior you perform, together with when it happens. "
        "[INPUT]: - You are given one first-person video followed by one image. - The video "
        "shows your flight from start to end. - The image is a reference view showing the "
        "landmark and its bounding box. - The user prompt gives the video duration and the "
        "behavior options. "
        "[OUTPUT]: 1. Return exactly one valid JSON object. 2. Do not output markdown, "
        "explanation, or extra text. 3. Use only option_id values from the user prompt; "
        "several options may apply. 4. Give every selected option all of its intervals as "
        "[start_sec,end_sec] pairs in seconds from the start of the video. "
        f"5. Strictly follow this JSON schema: {BEHAVIOR_CONTRACT} "
        "[NOTE]: 1. Options include composite behaviors (whole maneuvers) and atomic "
        "behaviors (single movements); return every option you observe, composite and atomic "
        "alike. 2. A composite behavior's interval covers all the movements it consists of. "
        "3. Every interval must satisfy 0 <= start_sec < end_sec <= the video duration."
    ),
    "landmark_visibility": (
        "[TASK]: You are a UAV agent. Watch a first-person video of your flight and determine "
        "when a landmark is visible. "
        "[INPUT]: - You are given one first-person video followed by one image. - The video "
        "shows your flight from start to end. - The image is a reference view showing the "
        "landmark and its bounding box. - The user prompt gives the video duration. "
        "[OUTPUT]: 1. Return exactly one valid JSON object. 2. Do not output markdown, "
        "explanation, or extra text. 3. visible_count is the number of separate intervals in "
        "which the landmark is visible, an integer (0 if it is never visible). "
        "4. visible_intervals_sec lists those intervals in time order as [start_sec,end_sec] "
        "pairs in seconds from the start of the video. "
        f"5. Strictly follow this JSON schema: {VISIBILITY_CONTRACT} "
        "[NOTE]: 1. The landmark counts as visible while any part of it is in view. 2. A new "
        "interval starts each time the landmark re-enters the view after leaving it. "
        "3. visible_count must equal the number of intervals."
    ),
}

USER_TEMPLATES: dict[str, str] = {
    # Verbatim from the seed page.
    "landmark_position": (
        "Image 1 shows the {{reference_object_view}} facade of {{landmark_description}} in the "
        "landmark-centric coordinate frame. Based on that reference, what is your position "
        "relative to the landmark in image 2? Select one option and return the normalized "
        "bounding box of the landmark in image 2. Options: {{options_text}}"
    ),
    "future_observation": (
        "Image 1 shows the {{reference_object_view}} facade of {{landmark_description}} in the "
        "landmark-centric coordinate frame. Starting from that view, you perform "
        "{{behavior_instance}}. Which candidate image (images 2-5) shows what you observe "
        "afterwards? Select one option and return the normalized bounding box of the landmark "
        "in the selected candidate image. Options: {{candidate_options_text}}"
    ),
    "self_position": (
        "Image 1 shows {{landmark_description}}, marked by its bounding box. Based on your "
        "current view in image 2, where is this landmark relative to you? Select one option "
        "and return the normalized bounding box of the landmark in image 2. "
        "Options: {{options_text}}"
    ),
    "action_decision": (
        "Image 1 shows {{landmark_description}}, marked by its bounding box. Your goal is to "
        "move toward this landmark. Based on your current view in image 2, which action "
        "should you take next? Select one option and return the normalized bounding box of "
        "the landmark in image 2. Options: {{options_text}}"
    ),
    "behavior": (
        "The video shows your flight around {{landmark_description}}, which the reference "
        "image marks by its bounding box. The video lasts {{duration_sec}} seconds. Which of "
        "the following behaviors do you perform, and when? Return every option you observe "
        "with all of its intervals in seconds. Options: {{options_text}}"
    ),
    "landmark_visibility": (
        "The reference image shows {{landmark_description}}, marked by its bounding box. The "
        "video lasts {{duration_sec}} seconds. How many separate times is this landmark "
        "visible in the video, and during which intervals? Return the count and every "
        "visible interval in seconds."
    ),
}

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class TemplateError(DualCogError, KeyError, ValueError):
    """A prompt cannot be rendered: an unknown task, or a variable missing (or null)."""

    def __init__(self, message: str, *, variable: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.variable = variable

    def __str__(self) -> str:  # KeyError would print the message quoted
        return self.message


def options_text(options: Sequence[Mapping[str, object]]) -> str:
    """One line per option, e.g. "A. Front\\nB. Back"; order as given."""
    lines = []
    for position, option in enumerate(options):
        for key in ("option_id", "label"):
            if key not in option or option[key] is None:
                raise TemplateError(
                    f"option {position} has no {key!r}", variable=f"options[{position}].{key}"
                )
        lines.append(f"{option['option_id']}. {option['label']}")
    if not lines:
        raise TemplateError("options is empty", variable="options")
    return "\n".join(lines)


def _format_value(value: object) -> str:
    if isinstance(value, float):  # numpy floats too; their repr would name the type
        return repr(round(float(value), 3))  # 4.9 -> "4.9", 5.0 -> "5.0"
    return str(value)


def _require(variables: Mapping[str, object], name: str, task: str) -> object:
    value = variables.get(name)
    if value is None:
        raise TemplateError(f"task {task!r} needs template variable {name!r}", variable=name)
    return value


def _fill(template: str, variables: Mapping[str, object], task: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name == "options_text":
            return options_text(_require(variables, "options", task))  # type: ignore[arg-type]
        if name == "candidate_options_text":
            return options_text(FUTURE_OBSERVATION_OPTIONS)
        return _format_value(_require(variables, name, task))

    return _PLACEHOLDER.sub(replace, template)


def template_variables(task: str) -> tuple[str, ...]:
    """The variables `render_prompt_texts` needs for `task` (options_text comes from options)."""
    if task not in USER_TEMPLATES:
        raise TemplateError(f"no prompt template for task {task!r}")
    names = []
    for template in (SYSTEM_TEMPLATES[task], USER_TEMPLATES[task]):
        for name in _PLACEHOLDER.findall(template):
            name = "options" if name == "options_text" else name
            if name != "candidate_options_text" and name not in names:
                names.append(name)
    return tuple(names)


def render_prompt_texts(task: str, variables: Mapping[str, object]) -> tuple[str, str]:
    """Render (system_prompt, user_prompt) for a request kind task id."""
    if task not in USER_TEMPLATES:
        raise TemplateError(f"no prompt template for task {task!r}")
    system_prompt = _fill(SYSTEM_TEMPLATES[task], variables, task)
    user_prompt = _fill(USER_TEMPLATES[task], variables, task)
    return system_prompt, user_prompt
