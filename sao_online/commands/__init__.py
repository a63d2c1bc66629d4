"""What the ``sao-online`` commands run beyond a single training run: comparisons of methods
and seeds (``compare``), the demo, the warm-start summary; ``sao-online bench`` is
:mod:`sao_online.perf`.

The core (models, rollout engine, learner, runtime) never imports from here.
"""
