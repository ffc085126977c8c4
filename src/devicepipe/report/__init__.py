"""The report a person opens first: one self-contained HTML page per run.

- :mod:`~devicepipe.report.render` renders a run's page from its summary and writes it (the
  Jinja2 template, the embedded figures and scripts, the content security policy);
- :mod:`~devicepipe.report.pages` holds the page of each kind of run (:data:`PAGES`: a new kind
  of run is one function and one line there), :mod:`~devicepipe.report.series_pages` those of
  load-series runs, :mod:`~devicepipe.report.common` what learning runs' pages share;
- :mod:`~devicepipe.report.parts` the sections, numbers, figures, heart rate, HRV and Holter
  parts every page is made of.
"""

from devicepipe.report.render import (
    MAX_FLAGGED_ROWS,
    REPORT_NAME,
    FlaggedRows,
    dataset_table,
    render_report,
    write_report,
)

__all__ = ["MAX_FLAGGED_ROWS", "REPORT_NAME", "FlaggedRows", "dataset_table", "render_report", "write_report"]
