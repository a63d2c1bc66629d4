"""Drifting agentic text environments (Gymnasium ``Env[str, str]``)."""
