"""Mode switches: the family of a run's base name and the request controls of its mode.

The rules are the benchmark authors' (`UPSTREAM_FORMAT.md` §5) as `PROTOCOL.md` §11.2-11.3
settle them: the base name (the run name without its `-Instant`, `-Thinking`, `-Reasoning` or
`-Thinking-High` suffix) decides the family by twelve substring rules, first match wins; the
controls come from the first row of the controls table that applies. A name the rules do not
recognise takes the model's configured `family:`, whose controls are that family's rows alone.

Pure data and functions, imported by configuration (validation) and by the request builder.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from dualcog.repeats import split_repeat_name

# `-Thinking-High` before `-Thinking` is not needed for the match (the base is the shortest
# prefix), but the alternatives are listed longest first for the reader.
MODE_SUFFIX = re.compile(r"^(.+?)-(Instant|Thinking-High|Thinking|Reasoning)$")
THINKING_SUFFIXES = frozenset({"Thinking", "Reasoning", "Thinking-High"})

# The authors' families, in the order of their rules.
FAMILIES = (
    "interns1",
    "internvl",
    "qwen",
    "claude",
    "xai",
    "gemini",
    "google",
    "kimi",
    "glm",
    "xiaomi",
)
# Families that send a `reasoning` object (OpenRouter style); `openrouter` is this project's
# name for that form where the rules recognise no family (GPT, Muse Spark).
REASONING_FAMILIES = frozenset(
    {"claude", "xai", "gemini", "google", "kimi", "xiaomi", "openrouter"}
)
# What a configured `family:` may say: the authors' families, and the two provider forms the
# rules otherwise reach only through a name (`dashscope`: the top-level `enable_thinking` of
# Qwen Plus/Flash and Kimi K2.5; `openrouter`: the reasoning object), and `none` (no switch).
CONFIG_FAMILIES = (*FAMILIES, "openrouter", "dashscope", "none")
# Older spellings of this project, read as the authors' names.
FAMILY_SPELLINGS = {"qwen_vllm": "qwen", "intern_s1": "interns1"}

QWEN_API_MODELS = ("qwen3.6-plus", "qwen3.5-plus", "qwen3.5-flash")
QWEN_SIZE_LIMITED = "qwen3.5-plus"  # DashScope refuses data-URI videos over 10 MiB (§11.4)
DEFAULT_THINKING_BUDGET = 4000
# InternVL: the Instant prefill (their code strips its own "<think>\n</think>\n") and the
# separator between the think-protocol prefix and the system prompt of a Thinking run.
INTERNVL_PREFILL = "<think>\n</think>"
INTERNVL_SEPARATOR = "\n\nThen follow the task-specific instruction below.\n\n"


class SwitchError(ValueError):
    """A run name whose mode cannot be sent on its route (the caller names the model)."""


def split_mode(run_name: str) -> tuple[str, str | None]:
    """(base name, suffix) of a run name; suffix None when it has none. A repeat
    (`<run>~r2`, dualcog.repeats) has its run's."""

    split = split_repeat_name(run_name)
    name = split[0] if split else run_name
    match = MODE_SUFFIX.match(name)
    return (name, None) if match is None else (match.group(1), match.group(2))


def authors_family(base: str) -> str | None:
    """The family the authors' twelve rules give a base name; None when none matches."""
    name = base.lower()
    if "intern-s1" in name:
        return "interns1"
    if "internvl" in name:
        return "internvl"
    if name.startswith(("pro/", "pro_")):
        return "qwen"
    specialised = ("vst-7b-rl", "vst-7b-sft", "spacethinker", "spaceom", "spacer", "livasr")
    if any(token in name for token in (*specialised, "vilasr")):
        return "qwen"
    if "qwen" in name:
        return "qwen"
    if "claude" in name:
        return "claude"
    if "x-ai/" in name or "grok" in name or name.startswith("x-ai"):
        return "xai"
    if "gemini" in name:
        return "gemini"
    if "google/" in name or "google_" in name or name.startswith("google"):
        return "google"
    if "kimi-k2.5" in name or "moonshotai/kimi" in name:
        return "kimi"
    if "glm-4.6v" in name or "z-ai/glm" in name:
        return "glm"
    if "mimo-v2-omni" in name or "xiaomi/mimo" in name:
        return "xiaomi"
    return None


def canonical_family(family: Any) -> str | None:
    """A configured family in the authors' spelling (None stays None)."""
    if family is None:
        return None
    return FAMILY_SPELLINGS.get(str(family), str(family))


def effective_family(base: str, configured: Any, override: bool) -> tuple[str | None, bool]:
    """(family that switches the run, whether the rows on the base name apply): the rules'
    family when they recognise `base` (unless `override`), else the configured one."""
    ruled = authors_family(base)
    if ruled is not None and not override:
        return ruled, True
    return canonical_family(configured), False


@dataclass(frozen=True)
class Switch:
    """What a run's mode adds to a request: body fields (the SDK's `extra_body`), an assistant
    prefill message, and whether the system text takes the InternVL think-protocol form."""

    body: dict[str, Any] = field(default_factory=dict)
    prefill: str | None = None
    system_prefix: bool = False

    def describe(self) -> dict[str, Any]:
        """The switch as recorded (PROTOCOL §11.5)."""
        return {"body": self.body, "prefill": self.prefill, "system_prefix": self.system_prefix}


def _instant(name: str, family: str | None, by_name: bool) -> Switch:
    if by_name and any(model in name for model in QWEN_API_MODELS):
        return Switch({"enable_thinking": False})
    if by_name and "kimi-k2.5" in name:
        return Switch({"enable_thinking": False})
    if family == "dashscope":
        return Switch({"enable_thinking": False})
    if family == "qwen":
        return Switch({"chat_template_kwargs": {"enable_thinking": False}})
    if family == "internvl":
        body = {"continue_final_message": True, "add_generation_prompt": False}
        return Switch(body, prefill=INTERNVL_PREFILL)
    if family == "interns1":
        return Switch({"thinking_mode": False})
    if family == "glm" or (by_name and "mimo-v2-omni" in name):
        return Switch({"thinking": {"type": "disabled"}})
    if family in REASONING_FAMILIES:
        return Switch({"reasoning": {"enabled": False}})
    return Switch()


def _thinking(name: str, family: str | None, by_name: bool, budget: int | None) -> Switch:
    if family == "internvl":
        return Switch(system_prefix=True)
    qwen_api = by_name and any(model in name for model in QWEN_API_MODELS)
    if qwen_api or family == "dashscope":
        body: dict[str, Any] = {"enable_thinking": True}
        if budget is not None:
            body["thinking_budget"] = int(budget)
        return Switch(body)
    if by_name and "kimi-k2.5" in name:
        return Switch({"enable_thinking": True})
    if by_name and "mimo-v2-omni" in name:
        return Switch()
    if family in REASONING_FAMILIES:
        return Switch({"reasoning": {"enabled": True}})
    return Switch()


def mode_switch(
    base: str,
    family: str | None,
    suffix: str | None,
    *,
    by_name: bool = True,
    thinking_budget: int | None = DEFAULT_THINKING_BUDGET,
    effort: str | None = None,
) -> Switch:
    """The controls of `suffix` on a route of base name `base` and family `family`.

    by_name: apply the rows that look at the base name (the authors' rules recognised it);
    False where a configured family decides (an unrecognised name, or `override_family`).
    effort: the reasoning effort of a `-Thinking`/`-Reasoning` run (reasoning-only routes);
    a `-Thinking-High` run asks "high" and needs a route whose Thinking sends `reasoning`.
    """
    if suffix is None:
        return Switch()
    name = base.lower()
    family = canonical_family(family)
    if suffix == "Instant":
        return _instant(name, family, by_name)
    if suffix not in THINKING_SUFFIXES:
        raise SwitchError(f"unknown mode suffix -{suffix}")
    switch = _thinking(name, family, by_name, thinking_budget)
    if suffix == "Thinking-High":
        if "reasoning" not in switch.body:
            raise SwitchError(
                f"-Thinking-High asks for effort 'high', but a -Thinking run of {base!r} "
                f"(family {family}) sends no `reasoning` object to carry it"
            )
        effort = "high"
    if effort is not None and "reasoning" in switch.body:
        body = copy.deepcopy(switch.body)
        body["reasoning"]["effort"] = effort
        switch = Switch(body, switch.prefill, switch.system_prefix)
    return switch


def internvl_system_text(prefix: str, system_text: str | None) -> str:
    """The system text of an InternVL Thinking request (sent as one text block)."""
    return (prefix + INTERNVL_SEPARATOR + (system_text or "")).strip()
