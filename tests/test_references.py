"""The papers named (issue 27): every ``[key]`` cited in the code, the documentation and the
reports resolves to a full reference; the bibliography page lists exactly those; a report
lists the papers it cites; no file name of a development copy is cited any more."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from postdp.errors import ValidationError
from postdp.references import REFERENCES, SEEDS, cite

ROOT = Path(__file__).resolve().parents[1]
KEY = re.compile(r"\[([a-z]+[0-9]{4})\]")
FILES = [
    *(ROOT / "src").rglob("*.py"),
    *(ROOT / "src").rglob("*.j2"),
    *(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts),
    ROOT / "README.md",
]


def test_every_cited_key_resolves_and_no_seed_file_is_cited():
    cited = set()
    for path in FILES:
        text = path.read_text(encoding="utf-8")
        cited |= set(KEY.findall(text))
        assert not re.search(r"\b00[0-4]_[0-9a-f]{16}\.txt", text), path
        assert not re.search(r"\bseed 00[0-4]\b", text), path
    assert cited and cited <= set(REFERENCES), cited - set(REFERENCES)
    assert set(SEEDS.values()) <= set(REFERENCES)


def test_the_bibliography_page_lists_every_reference():
    page = (ROOT / "docs" / "bibliography.md").read_text(encoding="utf-8")
    listed = [line for line in page.splitlines() if line.startswith("- **[")]
    assert listed == [f"- **[{r.key}]** {r}" for r in REFERENCES.values()]


def test_a_report_lists_the_papers_it_cites():
    from postdp.report import Headline, Report

    page = Report(
        "A page",
        "Follows [zhu2021] Thm 7 and [fioretto2021] Def. 3; [notakey2020] is no key.",
        {"design": "see [zhu2021]"},
        "study path",
        [Headline("bias", "0")],
    )
    assert [r.key for r in page.cited()] == ["zhu2021", "fioretto2021"]
    html = page.to_html()
    assert 'id="references"' in html and "arXiv:2105.07513" in html
    assert 'id="references"' not in Report("Plain", "Nothing cited.", {}, "").to_html()


def test_cite_takes_a_key_or_a_seed_number():
    assert cite("004") is cite("mcglinchey2020") and cite("004").doi.startswith("10.3934")
    with pytest.raises(ValidationError, match="unknown citation key"):
        cite("smith1999")
