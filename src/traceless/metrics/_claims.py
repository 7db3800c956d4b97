"""How a report reads a paper's claim: the sentence it tests, quoted, and the form the quote
gives it (a point with a tolerance, a ceiling "up to", a floor "at least", a direction, an
equality, zero observed). A claim whose value our own design parameters fix (τ, T,
``long_min_ratio``, the grid) names them in ``set_by`` and is labelled SET BY DESIGN, never
REPRODUCED."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel

__all__ = ["ClaimForm", "PaperClaim"]


class ClaimForm(StrEnum):
    """The reading a quote gives a claim."""

    POINT = "point ± tolerance"
    CEILING = 'ceiling ("up to")'
    FLOOR = 'floor ("at least")'
    DIRECTION = "direction"
    EQUALITY = "equality"
    ZERO = "zero observed"


class PaperClaim(BaseModel):
    """One claim of a paper as a report tests it."""

    paper: str
    """The paper's number: ``000`` frontier, ``001`` afterdelete, ``002`` replay."""
    where: str
    """Where the sentence stands (abstract, a table, a section)."""
    quote: str
    """The paper's sentence (or table cell), verbatim."""
    form: ClaimForm
    """The reading the quote gives the claim."""
    tolerance: float | None = None
    """``point``: the ± the report allows around the paper's value."""
    set_by: str = ""
    """Our design parameters that fix the measured value (non-empty: SET BY DESIGN)."""

    def reading(self) -> str:
        """``Paper 002 (abstract): "…" — read as a ceiling ("up to")``, plus what sets it."""
        tol = f" {self.tolerance:g}" if self.form is ClaimForm.POINT and self.tolerance is not None else ""
        design = f"; value set by our {self.set_by}" if self.set_by else ""
        return f'Paper {self.paper} ({self.where}): "{self.quote}" — read as {self.form.value}{tol}{design}'
