"""``sao-online bench``: measurements of the suite's own machinery (its performance), each
printing one JSON object.

One module per measurement, each a ``sao-online bench NAME`` subcommand (:mod:`.cli` declares
each one's flags):

- :mod:`.rollout`: the rollout engine against ``model.generate()``;
- :mod:`.sync_vs_async`: synchronous vs asynchronous training under long-tail latency;
- :mod:`.throughput`: GRPO completions per second end to end (:mod:`.trl_peer`: the same
  workload through TRL's ``GRPOTrainer``; :mod:`.phases`: where each trainer's time goes);
- :mod:`.contention`: the throughput workload with and without a busy core;
- :mod:`.sandbox`: program executions per second of each sandbox backend;
- :mod:`.learner`: seconds per learner update of each method.

The package is ``perf``, not ``bench``, so that it is not mistaken for the scored benchmark of
methods (``sao-online benchmark``), :mod:`sao_online.benchmark`.
Nothing is imported here: the command line declares the subcommands without importing torch.
"""

THROUGHPUT_RUNS = 5
"""``bench throughput``'s rounds by default: each side runs once per round."""
