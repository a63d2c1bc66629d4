"""A schedule's timeline as text and as a picture (``sao-online schedules show FILE``).

Example (``configs/schedules/style_shift_paper.yaml``)::

    >>> from sao_online.drift_schedules import load_schedule
    >>> print(format_timeline(load_schedule("configs/schedules/style_shift_paper.yaml")))
    clock: episodes  seed: 0  3 phase(s) up to t = 4500
    phase  start   end  theta
        0      0  1500  preferred=cute  pool=academic_cute_chuunibyou
        1   1500  3000  preferred=chuunibyou  pool=academic_cute_chuunibyou
        2   3000   ...  preferred=classical  pool=classical_cute_chuunibyou
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sao_online.drift_schedules.kinds import ParameterSchedule, format_value, numeric_values
from sao_online.drift_schedules.random_kinds import Gradual
from sao_online.drift_schedules.schedule import Schedule, check_time

#: The horizon when no parameter suggests one (all stationary or random walks).
FALLBACK_HORIZON = 100.0
#: Points at which continuously drifting parameters are drawn.
PLOT_SAMPLES = 600


def default_horizon(schedule: Schedule) -> float:
    """How far a timeline reaches by default: far enough to show every parameter's drift.

    That is 1.5 x the last change point (or the end of a linear ramp, or of a gradual
    window), two full cycles of a cyclic parameter, about five changes of a change_points
    one; :data:`FALLBACK_HORIZON` when nothing drifts.
    """
    hints = [
        hint
        for scheduler in schedule.parameters.values()
        if (hint := scheduler.horizon_hint()) is not None and hint > 0
    ]
    return max(hints, default=FALLBACK_HORIZON)


def _resolve_until(schedule: Schedule, until: float | None) -> float:
    if until is None:
        return default_horizon(schedule)
    until = check_time(until, "until")
    if until <= 0:
        raise ValueError(f"until: a timeline needs until > 0, got {until!r}")
    return until


def _format_time(t: float) -> str:
    return str(int(t)) if float(t).is_integer() else f"{t:.6g}"


def format_timeline(schedule: Schedule, until: float | None = None) -> str:
    """One line per phase up to ``until``: its index, start, end and parameter values.

    Piecewise-constant parameters show their value; a linear ramp shows ``from->to`` over the
    phase, a gradual shift both regimes and p(to) at the phase's ends, a random walk its
    values at the phase's ends. The last phase's end is written ``...``: it runs on.

    Args:
        schedule: the schedule to show.
        until: the horizon (default :func:`default_horizon`).
    """
    until = _resolve_until(schedule, until)
    starts = [0.0, *(point for point in schedule.change_points(until) if point < until)]
    ends = [*starts[1:], until]
    rows = []
    for index, (start, end) in enumerate(zip(starts, ends)):
        theta = "  ".join(
            f"{name}={scheduler.describe(start, end)}"
            for name, scheduler in schedule.parameters.items()
        )
        end_text = "..." if index == len(starts) - 1 else _format_time(end)
        rows.append((str(index), _format_time(start), end_text, theta))
    header = ("phase", "start", "end", "theta")
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(3)]
    lines = [
        f"clock: {schedule.clock}  seed: {schedule.seed}  "
        f"{len(rows)} phase(s) up to t = {_format_time(until)}"
    ]
    for row in [header, *rows]:
        cells = [cell.rjust(width) for cell, width in zip(row[:3], widths)]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    return "\n".join(lines)


def _sample_times(schedule: Schedule, until: float) -> np.ndarray:
    """Times to evaluate at: whole numbers for the counting clocks, as the runtime reads them."""
    times = np.linspace(0.0, until, PLOT_SAMPLES)
    if schedule.clock != "seconds":
        times = np.unique(np.floor(times))
    return times


def _draw_constant_pieces(axes, scheduler: ParameterSchedule, until: float) -> None:
    """A step line for a piecewise-constant parameter; categories also get coloured bands."""
    starts = [0.0, *(point for point in scheduler.change_points(until) if point < until)]
    values = [scheduler.value(start) for start in starts]
    categories = scheduler.possible_values() or []
    if numeric_values(categories):
        heights = [float(value) for value in values]
    else:
        heights = [categories.index(value) for value in values]
        colors = [f"C{index % 10}" for index in range(len(categories))]
        for start, end, height in zip(starts, [*starts[1:], until], heights):
            axes.axvspan(start, end, color=colors[height], alpha=0.2, linewidth=0)
        axes.set_yticks(range(len(categories)), [format_value(item) for item in categories])
        axes.set_ylim(-0.5, len(categories) - 0.5)
    axes.step([*starts, until], [*heights, heights[-1]], where="post", color="black")


def _draw_gradual(axes, scheduler: Gradual, times: np.ndarray) -> None:
    """The mixture: p(to) as a line between the two regimes, and the seeded draws as dots."""
    probability = np.array([scheduler.probability_to(t) for t in times])
    drawn_to = np.array([scheduler.value(t) == scheduler.to_value for t in times], dtype=float)
    if numeric_values([scheduler.from_value, scheduler.to_value]):
        low, high = float(scheduler.from_value), float(scheduler.to_value)
        axes.plot(times, low + (high - low) * probability, color="black", label="expected")
        axes.scatter(times, low + (high - low) * drawn_to, s=4, alpha=0.4, label="drawn")
    else:
        axes.plot(times, probability, color="black", label="p(to)")
        axes.scatter(times, drawn_to, s=4, alpha=0.4, label="drawn")
        axes.set_yticks(
            [0, 1], [format_value(scheduler.from_value), format_value(scheduler.to_value)]
        )
        axes.set_ylim(-0.15, 1.15)
    axes.legend(loc="center left", fontsize="x-small", frameon=False)


def plot_timeline(schedule: Schedule, path: str | Path, until: float | None = None) -> Path:
    """Save a PNG of the schedule: one row per parameter, dashed lines at the change points.

    Categorical parameters are drawn as steps over coloured bands (one colour per value),
    numeric ones as lines; a gradual shift shows p(to) and the seeded draws.

    Args:
        schedule: the schedule to draw.
        path: where to write the PNG (parent folders are created).
        until: the horizon (default :func:`default_horizon`).

    Returns:
        The path written.
    """
    # Imported here so that reading schedules (in every rollout worker) never loads matplotlib.
    from matplotlib.figure import Figure

    until = _resolve_until(schedule, until)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = list(schedule.parameters) or ["(no parameters)"]
    figure = Figure(figsize=(10, 1.0 + 1.3 * len(names)), layout="constrained")
    rows = figure.subplots(len(names), 1, sharex=True, squeeze=False)[:, 0]
    change_points = schedule.change_points(until)
    times = _sample_times(schedule, until)
    for axes, name in zip(rows, names):
        axes.set_title(name, loc="left", fontsize="medium", fontweight="bold")
        if change_points:
            axes.vlines(
                change_points,
                0,
                1,
                transform=axes.get_xaxis_transform(),
                colors="grey",
                linestyles="dashed",
                linewidth=0.8,
            )
        scheduler = schedule.parameters.get(name)
        if scheduler is None:
            continue
        if scheduler.piecewise_constant:
            _draw_constant_pieces(axes, scheduler, until)
        elif isinstance(scheduler, Gradual):
            _draw_gradual(axes, scheduler, times)
        else:
            axes.plot(times, [scheduler.value(t) for t in times], color="black")
    rows[-1].set_xlim(0, until)
    rows[-1].set_xlabel(f"t ({schedule.clock})")
    figure.suptitle(
        f"drift schedule (seed {schedule.seed}): "
        f"{len(change_points)} change point(s) up to t = {_format_time(until)}"
    )
    figure.savefig(path, dpi=100)
    return path
