"""Prompt templates: the seed page's template verbatim, the others' contracts, errors."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dualcog.prompts.templates import (
    SYSTEM_TEMPLATES,
    TemplateError,
    options_text,
    render_prompt_texts,
    template_variables,
)
from dualcog.tasks import REQUEST_KINDS

OPTIONS = [
    {"option_id": "A", "label": "Front"},
    {"option_id": "B", "label": "Back-Left"},
    {"option_id": "C", "label": "Right"},
    {"option_id": "D", "label": "Left"},
]
VARIABLES = {
    "landmark_description": "the magenta water tower",
    "reference_object_view": "Back-Left",
    "options": OPTIONS,
    "behavior_instance": "a 90-degree clockwise turn around the landmark",
    "duration_sec": 4.8,
}

# Copied from the seed page (seed_evaluation_protocol.txt, "Full Evaluation Prompt Templates").
SEED_SYSTEM = (
    "[TASK]: You are a UAV agent. Compare a reference view including a landmark and your current "
    "first-person view. Decide your position relative to the landmark. [INPUT]: - You are given "
    "two first-person view images. - Image 1 is the reference view, showing the landmark and its "
    "bounding box. - Image 2 is your current view. - Image 1 tells you which facade of the "
    "landmark is visible in the landmark-centric coordinate frame. - The user prompt gives the "
    "question and answer options. [OUTPUT]: 1. Return exactly one valid JSON object. 2. Do not "
    "output markdown, explanation, or extra text. 3. Use exactly one option_id from the user "
    "prompt. 4. The bounding box must use normalized [x1,y1,x2,y2] coordinates. 5. Strictly "
    'follow this JSON schema: {"answer_option_id":"A","bbox_xyxy_norm":[0.1,0.2,0.3,0.4]} '
    "[NOTE]: 1. Decide your position relative to the landmark in image 2. 2. Also localize the "
    "landmark in image 2. 3. The visible facade in image 1 defines the landmark's "
    "forward-facing reference."
)
SEED_USER = (
    "Image 1 shows the {{reference_object_view}} facade of {{landmark_description}} in the "
    "landmark-centric coordinate frame. Based on that reference, what is your position relative "
    "to the landmark in image 2? Select one option and return the normalized bounding box of the "
    "landmark in image 2. Options: {{options_text}}"
)

CANONICAL_KEYS = {
    "landmark_position": {"answer_option_id", "bbox_xyxy_norm"},
    "future_observation": {"answer_option_id", "bbox_xyxy_norm"},
    "self_position": {"answer_option_id", "bbox_xyxy_norm"},
    "action_decision": {"answer_option_id", "bbox_xyxy_norm"},
    "behavior": {"answers"},
    "landmark_visibility": {"visible_count", "visible_intervals_sec"},
}


def schema_in(system_prompt: str) -> dict:
    """The JSON object that follows 'Strictly follow this JSON schema:'."""
    tail = system_prompt.split("Strictly follow this JSON schema: ", 1)[1]
    value, _ = json.JSONDecoder().raw_decode(tail)
    return value


def test_options_text_one_line_per_option_in_given_order():
    assert options_text(OPTIONS) == "A. Front\nB. Back-Left\nC. Right\nD. Left"


def test_landmark_position_is_the_seed_template_verbatim():
    system_prompt, user_prompt = render_prompt_texts("landmark_position", VARIABLES)
    assert system_prompt == SEED_SYSTEM
    expected_user = (
        SEED_USER.replace("{{reference_object_view}}", "Back-Left")
        .replace("{{landmark_description}}", "the magenta water tower")
        .replace("{{options_text}}", "A. Front\nB. Back-Left\nC. Right\nD. Left")
    )
    assert user_prompt == expected_user


@pytest.mark.parametrize("task", [kind.task for kind in REQUEST_KINDS])
def test_every_request_kind_renders_with_its_canonical_contract(task):
    system_prompt, user_prompt = render_prompt_texts(task, VARIABLES)
    assert "{{" not in system_prompt + user_prompt
    for section in ("[TASK]:", "[INPUT]:", "[OUTPUT]:", "[NOTE]:"):
        assert section in system_prompt
    assert set(schema_in(system_prompt)) == CANONICAL_KEYS[task]
    assert "the magenta water tower" in user_prompt


def test_behavior_contract_and_instructions():
    system_prompt, user_prompt = render_prompt_texts("behavior", VARIABLES)
    assert schema_in(system_prompt) == {
        "answers": [
            {"option_id": "A", "intervals_sec": [[0.0, 1.2]]},
            {"option_id": "C", "intervals_sec": [[3.4, 5.0]]},
        ]
    }
    assert "every option you observe" in system_prompt
    assert "in seconds" in system_prompt
    assert "The video lasts 4.8 seconds." in user_prompt
    assert user_prompt.endswith("Options: A. Front\nB. Back-Left\nC. Right\nD. Left")


def test_visibility_asks_for_count_and_intervals():
    system_prompt, user_prompt = render_prompt_texts("landmark_visibility", VARIABLES)
    assert schema_in(system_prompt) == {
        "visible_count": 2,
        "visible_intervals_sec": [[0.0, 9.1], [17.7, 26.8]],
    }
    assert "visible_count is the number" in system_prompt
    assert "visible_intervals_sec lists" in system_prompt
    assert "4.8 seconds" in user_prompt


def test_future_observation_names_candidate_images_and_box_in_selected_one():
    system_prompt, user_prompt = render_prompt_texts("future_observation", VARIABLES)
    assert "Images 2-5 are the candidate future views A-D" in system_prompt
    assert "image 2 is option A" in system_prompt and "image 5 is option D" in system_prompt
    assert "a 90-degree clockwise turn around the landmark" in user_prompt
    assert "in the selected candidate image" in user_prompt
    assert user_prompt.endswith("Options: A. Image 2\nB. Image 3\nC. Image 4\nD. Image 5")
    # the sample's own option labels (which could name views) are never shown
    assert "Back-Left facade" in user_prompt and "B. Back-Left" not in user_prompt


def test_image_prompts_other_than_future_list_the_offered_options():
    for task in ("self_position", "action_decision"):
        _, user_prompt = render_prompt_texts(task, VARIABLES)
        assert user_prompt.endswith("Options: A. Front\nB. Back-Left\nC. Right\nD. Left")


def test_numpy_values_as_read_from_parquet_are_accepted():
    variables = dict(VARIABLES, options=np.array(OPTIONS, dtype=object))
    variables["duration_sec"] = np.float64(5.0)
    _, user_prompt = render_prompt_texts("behavior", variables)
    assert "The video lasts 5.0 seconds." in user_prompt
    assert "A. Front\nB. Back-Left" in user_prompt


@pytest.mark.parametrize("task", [kind.task for kind in REQUEST_KINDS])
def test_missing_variable_raises_template_error_naming_it(task):
    for name in template_variables(task):
        variables = {key: value for key, value in VARIABLES.items() if key != name}
        with pytest.raises(TemplateError, match=re.escape(repr(name))) as caught:
            render_prompt_texts(task, variables)
        assert caught.value.variable == name
        assert isinstance(caught.value, KeyError) and isinstance(caught.value, ValueError)


def test_null_variable_counts_as_missing():
    with pytest.raises(TemplateError) as caught:
        render_prompt_texts("landmark_visibility", dict(VARIABLES, duration_sec=None))
    assert caught.value.variable == "duration_sec"
    assert str(caught.value) == "task 'landmark_visibility' needs template variable 'duration_sec'"


def test_template_variables_per_task():
    assert set(template_variables("landmark_position")) == {
        "reference_object_view",
        "landmark_description",
        "options",
    }
    assert set(template_variables("future_observation")) == {
        "reference_object_view",
        "landmark_description",
        "behavior_instance",
    }
    assert set(template_variables("landmark_visibility")) == {
        "landmark_description",
        "duration_sec",
    }


def test_bad_options_and_unknown_task_raise():
    with pytest.raises(TemplateError, match="'label'"):
        options_text([{"option_id": "A"}])
    with pytest.raises(TemplateError, match="empty"):
        render_prompt_texts("self_position", dict(VARIABLES, options=[]))
    with pytest.raises(TemplateError, match="composite_behavior"):
        render_prompt_texts("composite_behavior", VARIABLES)
    assert set(SYSTEM_TEMPLATES) == {kind.task for kind in REQUEST_KINDS}
