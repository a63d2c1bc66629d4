"""Shared pieces of the plots: colours, shift markers, curves across seeds with a CI band.

Figures are built as ``matplotlib.figure.Figure`` objects, not through pyplot: nothing global
(backend, open-figure registry) is touched, and saving renders with the Agg canvas, so the plots
work on headless machines and a report with many figures leaks none.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from sao_online.analysis.aggregate import nan_interquartile_mean
from sao_online.analysis.curves import RunSeries

GRID_POINTS = 300
_TAB10 = colormaps["tab10"].colors
#: Each built-in method's colour and marker: the same in every figure of every report and
#: scorecard, whichever methods a figure shows (``frozen``, the floor, in grey).
_BUILTIN_STYLES: dict[str, tuple[tuple, str]] = {
    "sao": (_TAB10[0], "o"),
    "sao_running_mean": (_TAB10[2], "s"),
    "grpo": (_TAB10[1], "^"),
    "grpo_dis": (_TAB10[3], "v"),
    "frozen": (_TAB10[7], "X"),
    "sao_prompt_mean": (_TAB10[8], "D"),
    "sao_lambda1": (_TAB10[9], "P"),
    "sao_no_skip_obs": (_TAB10[4], "d"),
    "dr_grpo": (_TAB10[5], "<"),
    "dapo": (_TAB10[6], ">"),
    "gspo": (colormaps["tab20b"].colors[0], "h"),
    "rloo": (colormaps["tab20b"].colors[8], "p"),
}
#: Colours and markers a method of one's own (a plug-in) draws from, by a hash of its name.
_OTHER_COLORS = colormaps["Dark2"].colors
_OTHER_MARKERS = ("*", "H", "8", "d", "s", "o")


def method_style(method: str) -> tuple[tuple, str]:
    """The colour and marker of ``method``, stable by its name: a built-in method's own, and
    for any other name a pair picked by a hash of the name (so a plug-in method looks the same
    in every figure and every report).

    Example:
        >>> method_style("mine") == method_style("mine")
        True
        >>> method_style("sao")[1], method_style("grpo")[1]
        ('o', '^')
    """
    if method in _BUILTIN_STYLES:
        return _BUILTIN_STYLES[method]
    digest = int.from_bytes(hashlib.sha256(str(method).encode()).digest()[:4], "big")
    color = _OTHER_COLORS[digest % len(_OTHER_COLORS)]
    marker = _OTHER_MARKERS[(digest // len(_OTHER_COLORS)) % len(_OTHER_MARKERS)]
    return color, marker


def method_colors(methods: Sequence[str]) -> dict[str, tuple]:
    """A colour per method, stable by name (:func:`method_style`), in sorted order."""
    return {method: method_style(method)[0] for method in sorted(set(methods))}


def method_markers(methods: Sequence[str]) -> dict[str, str]:
    """A marker per method, stable by name (:func:`method_style`), in sorted order."""
    return {method: method_style(method)[1] for method in sorted(set(methods))}


def draw_method_line(
    ax: Axes, x: Any, y: Any, method: str, *, label: str, linewidth: float = 1.6
) -> None:
    """One method's curve in its colour, with its marker about eight times along it."""
    color, marker = method_style(method)
    ax.plot(
        x,
        y,
        color=color,
        marker=marker,
        markevery=marks_every(len(x)),
        linewidth=linewidth,
        label=label,
    )


def marks_every(points: int, marks: int = 8) -> int:
    """``markevery`` for a curve of ``points`` points: about ``marks`` markers on it."""
    return max(1, points // marks)


def label_colors(labels: Sequence[str]) -> dict[str, tuple]:
    """A colour per behaviour label, from a palette distinct from the method colours' order."""
    palette = colormaps["Dark2"].colors
    return {label: palette[index % len(palette)] for index, label in enumerate(labels)}


def new_axes(ax: Axes | None, figsize: tuple[float, float] = (9.0, 4.8)) -> Axes:
    if ax is not None:
        return ax
    return Figure(figsize=figsize, layout="constrained").add_subplot()


PHASE_LABEL_CHARS = 22  # a longer phase name is numbered on the plot and spelled out below


def phase_caption(phase_names: Sequence[str]) -> str:
    """The phase names, one per line, numbered as the plot numbers its phases."""
    return "\n".join(f"phase {number}: {name}" for number, name in enumerate(phase_names, 1))


def draw_shift_markers(
    ax: Axes,
    positions: Sequence[float],
    phase_names: Sequence[str] | None,
    *,
    color: str | tuple = "black",
    label_phases: bool = True,
) -> str | None:
    """Dashed vertical lines at each shift and a label at the left edge of each phase, on top.

    A phase name of up to ``PHASE_LABEL_CHARS`` characters is the label itself; a longer one
    (a late, short phase would cut it off at the axes' edge) is labelled ``phase k`` and the
    names are returned as a caption for the caller to put under the axes (``None`` when every
    name fits).
    """
    top = blended_transform_factory(ax.transData, ax.transAxes)
    finite = [position for position in positions if np.isfinite(position)]
    for position in finite:
        ax.axvline(position, color=color, linestyle="--", linewidth=1.0, alpha=0.8, zorder=1)
    if not label_phases or not phase_names:
        return None
    x_start = ax.get_xlim()[0]
    starts = [x_start, *finite]
    shown = list(zip(phase_names, starts))
    spelled_out = any(len(str(name)) > PHASE_LABEL_CHARS for name, _ in shown)
    for number, (name, start) in enumerate(shown, start=1):
        ax.text(
            start,
            0.98,
            f" phase {number}" if spelled_out else f" {name}",
            transform=top,
            ha="left",
            va="top",
            fontsize=8,
            color="dimgray",
            clip_on=True,
            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.7, "pad": 1.0},
        )
    if not spelled_out:
        return None
    return phase_caption([name for name, _ in shown])


def seed_band(
    curves: np.ndarray, *, reps: int, confidence: float, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """IQM across seeds (rows) at each grid point (columns) with a bootstrap percentile band.

    Whole curves are resampled (runs, not points), so the band reflects seed-to-seed variation.
    With one seed the band is the curve itself.
    """
    center = nan_interquartile_mean(curves, axis=0)
    if curves.shape[0] < 2:
        return center, center, center
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, curves.shape[0], size=(reps, curves.shape[0]))
    bootstrap = nan_interquartile_mean(curves[picks], axis=1)  # [reps, grid]
    tail = (1.0 - confidence) / 2.0
    all_missing = ~np.isfinite(bootstrap).any(axis=0)
    bootstrap[:, all_missing] = 0.0  # keeps nanquantile quiet; masked back to NaN below
    lower, upper = np.nanquantile(bootstrap, [tail, 1.0 - tail], axis=0)
    lower[all_missing] = np.nan
    upper[all_missing] = np.nan
    return center, lower, upper


def finish(ax: Axes, path: str | Path | None) -> Axes:
    """Save the figure holding ``ax`` when a path is given (creating its folder)."""
    if path is not None:
        save_figure(ax.figure, path)
    return ax


#: The resolution of the PNGs figures are saved as (``--dpi``); a PDF of each is saved beside.
DEFAULT_DPI = 150
_FIGURE_DPI: contextvars.ContextVar[int] = contextvars.ContextVar("figure_dpi", default=DEFAULT_DPI)


@contextlib.contextmanager
def figure_output(dpi: int | None = None) -> Iterator[None]:
    """While inside, figures are saved at ``dpi`` (None: the default, ``DEFAULT_DPI``).

    Raises:
        ValueError: a resolution outside [50, 1200].
    """
    if dpi is None:
        yield
        return
    if isinstance(dpi, bool) or not isinstance(dpi, int) or not 50 <= dpi <= 1200:
        raise ValueError(f"--dpi: must be an integer in [50, 1200], got {dpi!r}")
    token = _FIGURE_DPI.set(dpi)
    try:
        yield
    finally:
        _FIGURE_DPI.reset(token)


def save_figure(figure: Figure, path: str | Path) -> Path:
    """Save ``figure`` as the PNG ``path`` (at the resolution :func:`figure_output` set) and as
    a PDF beside it (vector graphics, what a journal takes); returns the PNG's path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=_FIGURE_DPI.get(), pil_kwargs={"compress_level": 1})
    figure.savefig(path.with_suffix(".pdf"), metadata={"CreationDate": None})
    return path


def legend_outside(ax: Axes, **kwargs) -> None:
    """The legend right of the axes, where it cannot cover a curve."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, **kwargs)


def draw_run_shift_markers(ax: Axes, series: list[RunSeries], colors: dict) -> str | None:
    """Shift markers for ``series``: one black line per shift where every run has it at the
    same position, else one set per method.

    Returns the caption for under the axes: ``draw_shift_markers``'s (None when the names fit
    on the plot), or, with one set of lines per method, what the lines are and the phase names.
    """
    counts = {len(s.shifts) for s in series}
    all_positions = np.array([s.shifts for s in series]) if len(counts) == 1 else None
    names = series[0].phase_names
    if all_positions is not None and np.allclose(all_positions, all_positions[0]):
        return draw_shift_markers(ax, list(all_positions[0]), names)
    by_method: dict[str, list[list[float]]] = {}
    for s in series:
        by_method.setdefault(s.key[1], []).append(s.shifts)
    # Runs reach the shifts at different x: phase labels on the plot would belong to one
    # method only, so the phases are named under the axes instead.
    for method, shifts in sorted(by_method.items()):
        width = min(map(len, shifts))
        median = list(np.median([row[:width] for row in shifts], axis=0))
        draw_shift_markers(ax, median, names, color=colors[method], label_phases=False)
    phases = phase_caption(names or [])
    return "dashed lines: each method's shifts (median over its seeds), in its colour" + (
        f"\n{phases}" if phases else ""
    )
