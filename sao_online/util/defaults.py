"""Defaults that the command line, the Python API and the analysis share, spelled once.

This module imports nothing, so the command line can show these in ``--help`` without loading
the analysis stack.
"""

#: The absolute recovery level, as a fraction of the oracle's reward, wherever none is given
#: (``recovery_metrics``, ``write_report``, ``api.report``, ``sao-online report``, the demo):
#: half the oracle, a level the tiny model reaches (its plateau on StyleShift is 0.6-0.7, a
#: fifth of its lines missing the quality bar), where 0.8 is never reached.
DEFAULT_ORACLE_FRACTION = 0.5
