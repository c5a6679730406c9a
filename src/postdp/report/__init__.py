"""Self-contained HTML reports of an audit, a fairness study or a budget plan.

A :class:`Report` holds what a reader needs: the design and its privacy statement, the
headline numbers with their uncertainty, tables (sortable and filterable in the browser) and
figures with captions that say how to read them. :meth:`Report.to_html` renders it with
Jinja2 into one file that needs no network to view: the figures are embedded as PNG data,
and the style sheet and the script are inline. The ``postdp`` commands ``audit``,
``fairness`` and ``plan`` write one with ``--report FILE.html``; :func:`audit` runs the
whole audit of the command (main, shifted and family runs) and its :meth:`Audit.report`
is the same page (and :func:`fairness_study` is ``postdp fairness``'s study);
:func:`audit_report` builds one from a Monte Carlo result in Python.
"""

from postdp.report._model import Headline, Report, ReportFigure, ReportTable, format_value
from postdp.report.accuracy_page import (
    accuracy_captions,
    accuracy_figures,
    accuracy_report,
    study_verdicts,
)
from postdp.report.audit_pages import audit_report, budget_statement, size_bins
from postdp.report.auditing import Audit, audit
from postdp.report.census_comparison import EstimatorComparison, compare_estimators
from postdp.report.fairness_study import FairnessStudy, fairness_study

__all__ = [
    "Audit",
    "EstimatorComparison",
    "FairnessStudy",
    "Headline",
    "Report",
    "ReportFigure",
    "ReportTable",
    "accuracy_captions",
    "accuracy_figures",
    "accuracy_report",
    "audit",
    "audit_report",
    "budget_statement",
    "compare_estimators",
    "fairness_study",
    "format_value",
    "size_bins",
    "study_verdicts",
]
