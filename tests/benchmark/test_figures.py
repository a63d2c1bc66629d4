"""The scorecard's reward-curve grid keeps its title inside the figure at every grid size."""

from __future__ import annotations

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from sao_online.benchmark.figures import recovery_grid_figure


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
