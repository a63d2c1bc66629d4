"""Runtimes that drive rollouts and the learner: sync, local processes, Ray.

A run's assembly is at this level: ``launch`` (``run_experiment``), ``context`` (what a run is
built from), ``loop`` (the training loop every backend shares), ``backends`` (which way a run
is executed), ``engines`` and ``envs`` (the rollout engine and the environments from the
config), ``evaluation`` (pinned-version evaluation) and ``frozen`` (the learner that never
updates). Below it:

- ``scheduling``: what runs when: the synchronous and asynchronous runtimes, the planner (the
  run's clock), the staleness gate, batch selection and the straggler rules;
- ``workers``: the worker pools that sample episodes: the pool protocol, the local (process)
  and Ray pools, the rollout worker's body, the weights published to it;
- ``host``: the machine's side: processes from a preloaded forkserver, torch threads per
  process, settings the machine cannot run, the ``__main__`` guard.
"""
