"""A report as a list of blocks, rendered to Markdown and to self-contained HTML.

Building the content once and rendering it twice keeps ``report.md`` and ``report.html`` saying
the same thing. The HTML carries its CSS inline and refers only to the PNG files next to it.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from pathlib import Path

import pandas as pd


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Paragraph:
    text: str


@dataclass
class Table:
    frame: pd.DataFrame
    caption: str = ""


@dataclass
class Image:
    path: str  # relative to the report
    caption: str


Block = Heading | Paragraph | Table | Image

_CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; max-width: 1100px;
       margin: 2em auto; padding: 0 1em; color: #222; line-height: 1.45; }
h1 { border-bottom: 2px solid #ddd; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eee; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .8em 0; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f4f4f4; }
tr:nth-child(even) td { background: #fafafa; }
figure { margin: 1em 0; }
figure img { max-width: 100%; border: 1px solid #eee; }
figcaption, .caption { font-size: 13px; color: #555; }
code { background: #f4f4f4; padding: 0 3px; }
"""


def _cell(value: object) -> str:
    if isinstance(value, float):
        return "" if pd.isna(value) else f"{value:.4g}"
    return "" if value is None else str(value)


# A cell starting with one of these is run as a formula by spreadsheet programs.
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with every text cell (and column name) a spreadsheet would run as a formula
    prefixed by ``'``, which spreadsheets show as text; numbers are left as they are."""

    def safe(value: object) -> object:
        if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
            return "'" + value
        return value

    safe_frame = frame.rename(columns=safe)
    for column in safe_frame.columns:
        if safe_frame[column].dtype == object or pd.api.types.is_string_dtype(safe_frame[column]):
            safe_frame[column] = safe_frame[column].map(safe)
    return safe_frame


def write_csv(frame: pd.DataFrame, path: str | Path) -> None:
    """Write ``frame`` as CSV with formula-like text cells neutralised (``spreadsheet_safe``)."""
    spreadsheet_safe(frame).to_csv(path, index=False)


def _md_escape(text: str) -> str:
    """``&`` and ``<`` as entities: no tag can start, while ``->`` stays as typed."""
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _md_text(text: str) -> str:
    """Markdown text with HTML escaped, so run and phase names cannot inject markup.

    `code` spans are kept when their backticks pair up plainly (single backticks, even count);
    inside them HTML is inert. Anything else is escaped as a whole, backticks shown as typed.
    """
    plain = text.count("`") % 2 == 0 and "``" not in text and "\\`" not in text
    if not plain:
        return _md_escape(text).replace("`", "\\`")
    parts = text.split("`")
    return "`".join(part if index % 2 else _md_escape(part) for index, part in enumerate(parts))


def to_markdown(blocks: list[Block]) -> str:
    lines: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            lines += ["#" * block.level + " " + _md_text(block.text), ""]
        elif isinstance(block, Paragraph):
            lines += [_md_text(block.text), ""]
        elif isinstance(block, Table):
            if block.caption:
                lines += [f"*{_md_text(block.caption)}*", ""]
            header = [_md_cell(column) for column in block.frame.columns]
            lines.append("| " + " | ".join(header) + " |")
            lines.append("|" + "|".join("---" for _ in header) + "|")
            for row in block.frame.itertuples(index=False):
                lines.append("| " + " | ".join(_md_cell(value) for value in row) + " |")
            lines.append("")
        elif isinstance(block, Image):
            caption = _md_text(block.caption).replace("[", "\\[").replace("]", "\\]")
            lines += [f"![{caption}]({block.path.replace(' ', '%20')})", "", f"*{caption}*", ""]
    return "\n".join(lines)


def _md_cell(value: object) -> str:
    """A table cell: HTML escaped, pipes and backticks taken literally, one line."""
    text = _md_escape(_cell(value)).replace("|", "\\|").replace("`", "\\`")
    return text.replace("\r", " ").replace("\n", " ")


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code> (the only Markdown the paragraphs use)."""
    parts = html.escape(text).split("`")
    return "".join(
        f"<code>{part}</code>" if index % 2 else part for index, part in enumerate(parts)
    )


def to_html(blocks: list[Block], title: str) -> str:
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            body.append(f"<h{block.level}>{_inline(block.text)}</h{block.level}>")
        elif isinstance(block, Paragraph):
            body.append(f"<p>{_inline(block.text)}</p>")
        elif isinstance(block, Table):
            if block.caption:
                body.append(f'<p class="caption">{_inline(block.caption)}</p>')
            header = "".join(f"<th>{html.escape(str(c))}</th>" for c in block.frame.columns)
            rows = "".join(
                "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                for row in block.frame.itertuples(index=False)
            )
            body.append(f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Image):
            caption = html.escape(block.caption)
            body.append(
                f'<figure><img src="{html.escape(block.path)}" alt="{caption}">'
                f"<figcaption>{caption}</figcaption></figure>"
            )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )
