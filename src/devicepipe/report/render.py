"""``report.html``: one self-contained page per run that a person opens to see what happened.

The page is rendered from a Jinja2 template (``templates/report.html.j2``, autoescaped, so a
file or column name is shown as text whatever it holds) from the run's ``summary.json`` fields,
its PNG figures (inlined as data URIs: the page opens from disk and links to nothing) and, for
learning runs, the flagged rows drawn as small inline SVG beside a typical row. It is written
atomically, before ``summary.json``.

The page of each kind of run (its facts and sections) is built in :mod:`devicepipe.report.pages`.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import time
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from markupsafe import Markup

from devicepipe import __version__
from devicepipe.artifacts.summaries import ABSENT, DatasetSummary, RunSummary, read_summary
from devicepipe.io import atomic_path
from devicepipe.report.pages import MAX_FLAGGED_ROWS, PAGES, REPORT_NAME, FlaggedRows, input_facts, timing
from devicepipe.report.parts import number

__all__ = ["MAX_FLAGGED_ROWS", "REPORT_NAME", "FlaggedRows", "dataset_table", "render_report", "write_report"]


def render_report(
    kind: str,
    summary: RunSummary | DatasetSummary | Mapping[str, Any] | None,
    files: dict[str, Path],
    *,
    flagged: FlaggedRows | None = None,
    extra_html: Markup | None = None,
    subtitle: str | None = None,
    warnings: Sequence[str] | None = None,
) -> str:
    """The page of one run as HTML text.

    ``kind`` is the command (``beats``, ``ecg``, ``score``, ``train``, ``series``, ``bench``),
    ``score-series`` (``score`` with a ``series`` model) or ``dataset``; ``summary`` what the run
    found (typed, or its ``summary.json`` object; none for ``bench``); ``files`` the run's files
    by name (its PNGs are inlined); ``subtitle`` and ``warnings`` replace the summary's own.
    """
    page = PAGES.get(kind)
    if page is None:
        raise ValueError(f"render_report(): unknown kind {kind!r}; known: {sorted(PAGES)}")
    if isinstance(summary, Mapping):
        summary = read_summary(summary)
    run = summary if isinstance(summary, RunSummary) else None
    source = str(summary.input or "") if summary is not None else ""
    facts = input_facts(run) if run is not None else []
    facts, sections = page(summary, files, facts, flagged, extra_html)
    if run is not None:
        sections.append(timing(run))
    command = "score" if kind == "score-series" else kind
    title = f"devicepipe {command}: {Path(source).name or source}" if source else f"devicepipe {command}"
    if subtitle is None:
        channel = run.channel if run is not None and run.channel is not None else ABSENT
        subtitle = source + (f", channel {channel}" if channel is not ABSENT else "")
    if warnings is None:
        warnings = (run.warnings or []) if run is not None else []
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            title=title,
            subtitle=subtitle,
            warnings=warnings,
            facts=facts,
            sections=sections,
            version=__version__,
            written=time.strftime("%Y-%m-%d %H:%M"),
            csp=CSP,
        )
    )


DATASET_COLUMNS = (
    ("status", "status"),
    ("beats", "beats"),
    ("kept", "kept"),
    ("flagged", "flagged"),
    ("v_burden_pct", "V %"),
    ("s_burden_pct", "S %"),
    ("pauses", "pauses"),
    ("af_share", "irregular share"),
    ("tp", "TP"),
    ("fp", "FP"),
    ("fn", "FN"),
    ("duration_s", "seconds recorded"),
    ("seconds", "seconds to run"),
    ("worker", "worker"),
    ("error", "error or warnings"),
)

#: The script of a dataset page: click a column's name to sort the rows by it.
_SORTABLE_JS = """
document.querySelectorAll("table.sortable th").forEach((th, col) => th.addEventListener("click", () => {
  const body = th.closest("table").tBodies[0];
  const up = th.dataset.order !== "up";
  th.dataset.order = up ? "up" : "down";
  const key = tr => tr.cells[col].dataset.key ?? tr.cells[col].textContent;
  const rows = Array.from(body.rows).sort((a, b) => {
    const x = key(a), y = key(b), nx = parseFloat(x), ny = parseFloat(y);
    const c = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
    return up ? c : -c;
  });
  rows.forEach(r => body.appendChild(r));
}));
"""
_SORTABLE = Markup(f"<script>{_SORTABLE_JS}</script>")


def _script_hash(script: str) -> str:
    """A Content-Security-Policy source that allows exactly this inline script."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(script.encode()).digest()).decode() + "'"


#: Every page's Content-Security-Policy: nothing is fetched from anywhere, images are inline
#: data, and no script runs but the page's own (by its hash): not a ``javascript:`` link, not a
#: script a file or column name might smuggle in.
CSP = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    f"script-src {_script_hash(_SORTABLE_JS)}; base-uri 'none'; form-action 'none'"
)


def dataset_table(rows: Sequence[dict[str, Any]], link: str = REPORT_NAME) -> Markup:
    """The recordings of a dataset run as a sortable HTML table, failures first, each name
    linking to ``RUN/report.html`` (relative, so the folder can be moved)."""
    ordered = sorted(rows, key=lambda r: r["status"] != "failed")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["fmt"] = number
    env.filters["relative"] = _relative_href
    template = env.from_string(
        """<table class="sortable"><thead><tr><th>recording</th>
{%- for _, head in columns %}<th>{{ head }}</th>{% endfor %}</tr></thead><tbody>
{%- for r in rows %}<tr{% if r.status == "failed" %} style="background:#fdecec"{% endif %}>
<td>{% if r.status == "ok" %}<a href="{{ r.run|relative }}/{{ link }}">{{ r.run }}</a>
{%- else %}{{ r.run }}{% endif %}</td>
{%- for key, _ in columns %}{% set v = r[key] if key != "error" else (r.error or r.warnings or "") %}
{%- if v is number and v is not boolean %}<td class="num" data-key="{{ v }}">{{ v|fmt }}</td>
{%- elif v is none %}<td data-key="-1"></td>{% else %}<td>{{ v }}</td>{% endif %}{% endfor %}</tr>
{%- endfor %}</tbody></table>"""
    )
    return Markup(template.render(rows=ordered, columns=DATASET_COLUMNS, link=link)) + _SORTABLE


def _relative_href(run: str) -> str:
    """A run directory's name as a relative link: each part percent-encoded, after ``./``, so that
    no name (``javascript:...``, ``//host``, ``?``, ``#``) is read as anything but a path."""
    return "./" + "/".join(quote(part, safe="") for part in str(run).split("/"))


@functools.cache
def _environment() -> jinja2.Environment:
    """The Jinja2 environment of the pages, made once: it compiles the template on first use
    and keeps it (compiling takes longer than rendering a page)."""
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(_template), autoescape=True, undefined=jinja2.StrictUndefined
    )
    environment.filters["fmt"] = number
    return environment


def _template(name: str) -> str:
    return resources.files("devicepipe").joinpath("templates", name).read_text(encoding="utf-8")


def write_report(
    out: str | Path,
    kind: str,
    summary: RunSummary | DatasetSummary | Mapping[str, Any] | None,
    files: dict[str, Path],
    *,
    flagged: FlaggedRows | None = None,
    extra_html: Markup | None = None,
    subtitle: str | None = None,
    warnings: Sequence[str] | None = None,
) -> Path:
    """Render :func:`render_report` and write it to ``out/report.html`` atomically."""
    path = Path(out) / REPORT_NAME
    html = render_report(
        kind, summary, files, flagged=flagged, extra_html=extra_html, subtitle=subtitle, warnings=warnings
    )
    with atomic_path(path) as tmp:
        tmp.write_text(html, encoding="utf-8")
    return path
