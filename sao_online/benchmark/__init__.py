"""``sao-online benchmark``: a declared suite of drifting tasks run under one protocol, scored
against two measured anchors (the ``frozen`` warm start and the oracle), aggregated as rliable
does, and written up as a scorecard with its data and provenance.

>>> from sao_online.benchmark import run_benchmark, merge_results      # doctest: +SKIP
>>> run_benchmark(out="bench", tier="smoke", methods=["sao", "grpo"])   # doctest: +SKIP
"""

from sao_online.benchmark.merge import merge_results
from sao_online.benchmark.protocol import FLOOR_METHOD, MIN_GAP, ProtocolMismatch
from sao_online.benchmark.runner import run_benchmark
from sao_online.benchmark.scorecard import write_scorecard
from sao_online.benchmark.suite import SuiteError, builtin_suites, plan_tier

__all__ = [
    "FLOOR_METHOD",
    "MIN_GAP",
    "ProtocolMismatch",
    "SuiteError",
    "builtin_suites",
    "merge_results",
    "plan_tier",
    "run_benchmark",
    "write_scorecard",
]
