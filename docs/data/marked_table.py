"""Markdown tables that the scripts under ``docs/data/`` write between a marker pair of a page."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd


def markdown(frame: pd.DataFrame) -> str:
    """``frame`` as a Markdown table (headers stripped of the spaces that keep them unique)."""
    header = [str(column).strip() for column in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join(lines) + "\n"


def replace_marked(page: str, path: Path, opening: str, end: str, table: str) -> str:
    """``page`` (read from ``path``) with the text between ``opening`` and ``end`` replaced by
    ``table``; a page without the pair is an error that names both."""
    marker = re.compile(re.escape(opening) + r".*?" + re.escape(end), re.DOTALL)
    if not marker.search(page):
        raise SystemExit(f"{path}: no {opening.strip()} ... {end} pair to write the table in")
    return marker.sub(lambda _: opening + table + end, page)
