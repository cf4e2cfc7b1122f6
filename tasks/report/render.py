"""The report model (:mod:`tasks.report.model`) rendered by Jinja2 templates: report.md, the
run's markdown artifact, and report.html.

Every value a template prints passes through its format's escape (the environments' ``finalize``),
so a template cannot forget one: Markdown specials are escaped in report.md (as ``esc`` does),
HTML in report.html (as ``html.escape`` does); both defang addresses. Code blocks (SQL, commands)
go through the ``code`` filter instead, and report.md's blocks are fenced by ``fence``.
"""

from __future__ import annotations

import base64
import re
from html import escape as html_escape
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from sql_tools.output import printable
from tasks.report.text import _MD_SPECIAL, defang
from tasks.report.model import Report

TEMPLATES = Path(__file__).parent / "templates"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _md_value(value: Any) -> Any:
    """Any printed value in report.md: defanged and Markdown-escaped (``Markup`` is ours: a
    macro's output or a filter's). Returned as ``Markup`` so the environment's autoescape, which
    is on for the macros' sake, adds no HTML escaping to Markdown."""
    if isinstance(value, Markup):
        return value
    return Markup(_MD_SPECIAL.sub(r"\\\1", defang(str(value))))


def _md_code(value: Any, one_line: bool = False) -> Markup:
    """A fenced block's text, as it is (hidden characters as escapes): the block's fence
    (:func:`_md_fence`) is longer than any run of backticks in it, so none can close it and a
    copy of the block's text is the text itself, a command still the same command."""
    body = " ".join(str(value).split()) if one_line else str(value)
    return Markup(printable(body, keep="\n"))


def _md_fence(body: Any, info: str = "") -> Markup:
    """``body`` as a fenced code block whose fence of backticks is longer than any run of
    backticks inside it (CommonMark: a fence closes only on a run at least as long)."""
    text = str(body).strip("\n")
    runs = [len(r) for r in re.findall(r"`+", text)]
    fence = "`" * max(3, max(runs, default=0) + 1)
    return Markup(f"{fence}{info}\n{text}\n{fence}")


def _html_value(value: Any) -> Any:
    """Any printed value in report.html: defanged and HTML-escaped, quotes too (``Markup`` is
    ours: a macro's output or a filter's)."""
    if isinstance(value, Markup):
        return value
    return Markup(html_escape(defang(str(value)), quote=True))


def _html_code(value: Any, one_line: bool = False) -> Markup:
    return Markup(html_escape(printable(str(value), keep="\n"), quote=False))


@cache
def environment(kind: str) -> Environment:
    """The Jinja2 environment of ``md`` or ``html``."""
    html = kind == "html"
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,  # macros' output is then Markup, printed as is; see ``finalize``
        finalize=_html_value if html else _md_value,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["code"] = _html_code if html else _md_code
    env.filters["fence"] = _md_fence
    return env


def markdown(report: Report, charts: Sequence[tuple[str, str]] = ()) -> str:
    """report.md (and, without ``charts``, the run's artifact): ``charts`` are
    ``(relative path, alt text)`` of our own chart files."""
    text = environment("md").get_template("report.md.j2").render(r=report, charts=charts)
    return _squeeze(text)


def html(
    report: Report,
    images: Mapping[str, bytes],
    captions: Mapping[str, str],
    chart_notes: Sequence[str],
    csp: str,
    css: str,
) -> str:
    """report.html: standalone, charts inline as ``data:`` PNGs (only real PNGs)."""
    figures = [
        (Markup(f"data:image/png;base64,{base64.b64encode(images[n]).decode('ascii')}"), alt)
        for n, alt in captions.items()
        if n in images and images[n].startswith(PNG_MAGIC)
    ]
    page = environment("html").get_template("report.html.j2").render(
        r=report, figures=figures, chart_notes=list(chart_notes), csp=csp, css=Markup(css)
    )
    return _squeeze(page)


def _squeeze(text: str) -> str:
    """No runs of blank lines, one newline at the end."""
    out: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if line or (out and out[-1]):
            out.append(line)
    return "\n".join(out).strip() + "\n"
