"""The papers postdp implements, by citation key.

Docstrings, documentation pages and reports cite a paper as ``[key]`` (e.g. ``[zhu2021]
Thm 7``); :data:`REFERENCES` resolves a key to its authors, title, venue, year and, where
they exist, its arXiv id and DOI. The project's development copies of the papers (the
"seeds") are :data:`SEEDS`.

Examples
--------
>>> str(REFERENCES["fioretto2021"]).split(" (")[0]
'Fioretto, F., Tran, C., Van Hentenryck, P.'
>>> cite("mcglinchey2020").arxiv
'2101.02957'
"""

from __future__ import annotations

from dataclasses import dataclass, field

from postdp.errors import ValidationError

__all__ = ["REFERENCES", "SEEDS", "Reference", "cite"]


@dataclass(frozen=True)
class Reference:
    """One paper.

    Attributes
    ----------
    key : str
    authors : str
    title : str
    venue : str
    year : int
    arxiv : str
        The arXiv id ("" when there is none).
    doi : str

    Examples
    --------
    >>> r = Reference("doe2020", "Doe, J.", "A Title", "A Journal", 2020, arxiv="2001.00001")
    >>> str(r)
    'Doe, J. (2020). A Title. A Journal. arXiv:2001.00001.'
    """

    key: str
    authors: str
    title: str
    venue: str
    year: int
    arxiv: str = field(default="", kw_only=True)
    doi: str = field(default="", kw_only=True)

    def __str__(self) -> str:
        text = f"{self.authors} ({self.year}). {self.title}. {self.venue}."
        if self.doi:
            text += f" doi:{self.doi}."
        if self.arxiv:
            text += f" arXiv:{self.arxiv}."
        return text


REFERENCES: dict[str, Reference] = {
    r.key: r
    for r in (
        Reference(
            "zhu2021",
            "Zhu, K., Van Hentenryck, P., Fioretto, F.",
            "Bias and Variance of Post-processing in Differential Privacy",
            "Proceedings of the AAAI Conference on Artificial Intelligence (AAAI)",
            2021,
            arxiv="2010.04327",
        ),
        Reference(
            "zhu2020",
            "Zhu, K., Van Hentenryck, P., Fioretto, F.",
            "Bias and Variance of Post-processing in Differential Privacy (preprint version)",
            "arXiv preprint",
            2020,
            arxiv="2010.04327",
        ),
        Reference(
            "fioretto2021",
            "Fioretto, F., Tran, C., Van Hentenryck, P.",
            "Decision Making with Differential Privacy under a Fairness Lens",
            "Proceedings of the International Joint Conference on Artificial Intelligence "
            "(IJCAI); extended version on arXiv",
            2021,
            arxiv="2105.07513",
        ),
        Reference(
            "wang2021",
            "Wang, Z., Reiter, J. P.",
            "Post-processing Differentially Private Counts to Satisfy Additive Constraints",
            "Transactions on Data Privacy",
            2021,
        ),
        Reference(
            "mcglinchey2020",
            "McGlinchey, A., Mason, O.",
            "Observations on the Bias of Nonnegative Mechanisms for Differential Privacy",
            "Foundations of Data Science 2(4), 429-442",
            2020,
            arxiv="2101.02957",
            doi="10.3934/fods.2020020",
        ),
    )
}

#: The project's development copies of the papers (``shared/seeds/NNN_*.txt``) by number.
SEEDS = {
    "000": "zhu2021",
    "001": "zhu2020",
    "002": "fioretto2021",
    "003": "wang2021",
    "004": "mcglinchey2020",
}


def cite(key: str) -> Reference:
    """The paper of a citation key.

    Parameters
    ----------
    key : str
        E.g. ``"zhu2021"`` (or a seed number, ``"000"``).

    Returns
    -------
    Reference

    Raises
    ------
    ValidationError
        For an unknown key.

    Examples
    --------
    >>> cite("000").title
    'Bias and Variance of Post-processing in Differential Privacy'
    """
    found = REFERENCES.get(SEEDS.get(key, key))
    if found is None:
        raise ValidationError(f"unknown citation key {key!r}; known: {', '.join(REFERENCES)}")
    return found
