"""The Jinja2 environments that render the packaged templates (HTML and LaTeX)."""

from __future__ import annotations

from functools import cache

import jinja2


@cache
def html_environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dualcog.tables", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@cache
def latex_environment() -> jinja2.Environment:
    # LaTeX braces clash with Jinja's defaults; values are escaped before rendering.
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dualcog.tables", "templates"),
        block_start_string="((*",
        block_end_string="*))",
        variable_start_string="(((",
        variable_end_string=")))",
        comment_start_string="((=",
        comment_end_string="=))",
        autoescape=False,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
