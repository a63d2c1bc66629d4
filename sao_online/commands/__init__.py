"""What the ``sao-online`` commands run beyond a single training run: comparisons of methods
and seeds (``compare``), the demo, the warm-start summary and the benchmarks (``bench_*``).

The core (models, rollout engine, learner, runtime) never imports from here.
"""
