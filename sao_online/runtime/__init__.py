"""Runtimes that drive rollouts and the learner: sync, local processes, Ray."""
