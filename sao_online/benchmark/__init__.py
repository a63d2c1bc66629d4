"""``sao-online benchmark``: a declared suite of drifting tasks run under one protocol, scored
against two measured anchors (the ``frozen`` warm start and the oracle), aggregated as rliable
does, and written up as a scorecard with its data and provenance.

>>> from sao_online.benchmark import run_benchmark, run_sweep          # doctest: +SKIP
>>> run_benchmark(out="bench", tier="smoke", methods=["sao", "grpo"])   # doctest: +SKIP
>>> run_sweep(sweep="runtime.max_staleness=0,4", out="sweep", tier="async")  # doctest: +SKIP
"""

from sao_online.benchmark.merge import merge_results
from sao_online.benchmark.protocol import FLOOR_METHOD, MIN_GAP, ProtocolMismatch
from sao_online.benchmark.runner import run_benchmark
from sao_online.benchmark.scorecard import write_scorecard
from sao_online.benchmark.suite import SuiteError, builtin_suites, plan_tier
from sao_online.benchmark.sweep import merge_sweeps, run_sweep

__all__ = [
    "FLOOR_METHOD",
    "MIN_GAP",
    "ProtocolMismatch",
    "SuiteError",
    "builtin_suites",
    "merge_results",
    "merge_sweeps",
    "plan_tier",
    "run_benchmark",
    "run_sweep",
    "write_scorecard",
]
