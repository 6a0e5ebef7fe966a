"""Positions in the user's SQL text."""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass

from arroyo.errors import Span


@dataclass(frozen=True, slots=True)
class SourceText:
    """The whole script; turns character offsets into 1-based line/column spans."""

    text: str

    def span(self, offset: int) -> Span:
        starts = self._line_starts()
        line = bisect_right(starts, offset)
        return Span(line=line, column=offset - starts[line - 1] + 1)

    def _line_starts(self) -> list[int]:
        starts = [0]
        starts.extend(i + 1 for i, ch in enumerate(self.text) if ch == "\n")
        return starts
