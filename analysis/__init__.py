"""Recovery metrics, aggregation across seeds, plots and reports.

>>> from sao_online.analysis import load_runs, recovery_metrics, plot_recovery, write_report
>>> episodes = load_runs("runs/style-shift")                      # doctest: +SKIP
>>> per_seed = recovery_metrics(episodes)                          # doctest: +SKIP
>>> write_report("runs/style-shift", "reports/style-shift")        # doctest: +SKIP
"""

from sao_online.analysis.aggregate import (
    ImprovementEstimate,
    aggregate_recovery,
    interquartile_mean,
    probability_of_improvement,
    stratified_bootstrap_ci,
)
from sao_online.analysis.loading import RunLoadError, find_run_dirs, load_run_configs, load_runs
from sao_online.analysis.plots import (
    plot_behavior_shares,
    plot_metric_intervals,
    plot_recovery,
    plot_staleness_histogram,
    plot_update_metric,
)
from sao_online.analysis.prompt_groups import reward_by_prompt_key
from sao_online.analysis.recovery import RECOVERY_COLUMNS, recovery_metrics
from sao_online.analysis.report import write_report
from sao_online.analysis.smoothing import trailing_mean

__all__ = [
    "RECOVERY_COLUMNS",
    "ImprovementEstimate",
    "RunLoadError",
    "aggregate_recovery",
    "find_run_dirs",
    "interquartile_mean",
    "load_run_configs",
    "load_runs",
    "plot_behavior_shares",
    "plot_metric_intervals",
    "plot_recovery",
    "plot_staleness_histogram",
    "plot_update_metric",
    "probability_of_improvement",
    "recovery_metrics",
    "reward_by_prompt_key",
    "stratified_bootstrap_ci",
    "trailing_mean",
    "write_report",
]
