"""The scorecard's figures: the reward-curve grid keeps its title inside the figure at every grid
size, a method has one colour and marker in every figure, and each figure is a PNG at the asked
resolution with a PDF beside it."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_hex
from PIL import Image

from sao_online.analysis.plot_common import DEFAULT_DPI, figure_output, method_style
from sao_online.benchmark.figures import plot_recovery_grid, recovery_grid_figure


def _inputs(tasks: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    curves = pd.DataFrame(
        [
            {
                "task": task,
                "method": method,
                "seed": seed,
                "start": start,
                "end": start + 50,
                "episodes": 50,
                "reward_mean": 0.1 * seed + (0.5 if method == "sao" else 0.2),
            }
            for task in tasks
            for method in ("frozen", "sao")
            for seed in (0, 1)
            for start in range(0, 200, 50)
        ]
    )
    phases = pd.DataFrame(
        [
            {"task": task, "phase": k, "start": 100 * k, "end": 100 * k + 99, "oracle_mean": 1.0}
            for task in tasks
            for k in (0, 1)
        ]
    )
    shifts = pd.DataFrame([{"task": task, "tau": 100} for task in tasks])
    return curves, shifts, phases


@pytest.mark.parametrize("count", [1, 2, 5])
def test_the_title_fits_the_figure(count):
    figure = recovery_grid_figure(*_inputs([f"Task{k}" for k in range(count)]))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    renderer = canvas.get_renderer()
    title = figure._suptitle.get_window_extent(renderer)
    assert title.x0 >= 0 and title.x1 <= figure.bbox.width, (title, figure.bbox)


def _line_styles(figure) -> dict[str, tuple]:
    """(colour, marker) of each labelled line of a figure, by label."""
    styles = {}
    for ax in figure.axes:
        for line in ax.get_lines():
            label = line.get_label()
            if not label.startswith("_"):
                styles[label] = (to_hex(line.get_color()), line.get_marker())
    return styles


def test_a_method_looks_the_same_in_every_figure_whoever_else_is_in_it():
    # Two figures with different sets of methods: sorted-order colours would shift "sao".
    curves, shifts, phases = _inputs(["T"])
    both = _line_styles(recovery_grid_figure(curves, shifts, phases))
    mine = curves.assign(method=curves["method"].replace({"frozen": "my_method"}))
    other = _line_styles(recovery_grid_figure(mine, shifts, phases))
    assert both["sao"] == other["sao"] == (to_hex(method_style("sao")[0]), "o")
    assert other["my_method"] == (
        to_hex(method_style("my_method")[0]),
        method_style("my_method")[1],
    )
    assert method_style("my_method") == method_style("my_method")  # by name, not by order
    assert len({method_style(m) for m in ("sao", "sao_running_mean", "grpo", "grpo_dis")}) == 4


def test_figures_come_as_png_at_the_asked_resolution_and_as_pdf_beside(tmp_path):
    curves, shifts, phases = _inputs(["T"])
    with figure_output(dpi=60):
        small = plot_recovery_grid(curves, shifts, phases, tmp_path / "small.png")
    large = plot_recovery_grid(curves, shifts, phases, tmp_path / "large.png")  # the default
    widths = [Image.open(path).size[0] for path in (small, large)]
    assert widths[1] == pytest.approx(widths[0] * DEFAULT_DPI / 60, rel=0.02)
    assert (tmp_path / "small.pdf").read_bytes().startswith(b"%PDF")
    refused = pytest.raises(ValueError, match=r"--dpi: must be an integer in \[50, 1200\], got 5")
    with refused, figure_output(dpi=5):
        pass
