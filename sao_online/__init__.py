"""sao-online: Single-rollout Asynchronous Optimization (SAO) for agentic RL, as an
online-learning simulation suite with drifting environments."""

__version__ = "0.1.0"
