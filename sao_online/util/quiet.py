"""Quiet output: other libraries' progress bars, log lines and warnings off unless asked for.

The command line shows its own progress bars and its own one-line warnings; what transformers,
huggingface_hub and the like print on the side (a "Loading weights" bar at every run start, a
"Writing model shards" bar when a warm start is saved, advisory warnings) is noise to a user of
this tool. :func:`quiet_other_libraries` turns it off in this process and, through environment
variables, in every process it starts (rollout workers, ``compare``'s runs); ``--verbose``
leaves everything on. A variable the user set already is left as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Iterator

#: Environment variables read by other libraries when they are imported (so they reach child
#: processes too): no huggingface_hub / transformers progress bars, transformers logs errors
#: only, and Python warnings are ignored in child processes (this process filters its own, see
#: :func:`is_own_warning`).
QUIET_ENVIRONMENT = {
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "PYTHONWARNINGS": "ignore",
}


#: Set to 1 while ``--verbose`` is on, for this process and the ones it starts: a failed run's
#: whole traceback is then printed, not only where it is kept.
VERBOSE_VARIABLE = "SAO_ONLINE_VERBOSE"


def verbose_output() -> bool:
    """Whether ``--verbose`` is on (in this process or the command that started it)."""
    return os.environ.get(VERBOSE_VARIABLE) == "1"


def progress_bars(progress: bool) -> bool:
    """Whether to draw progress bars: asked for, and stderr is a terminal (redrawn bars in a log
    file are carriage returns by the tens of kilobytes a minute)."""
    return progress and sys.stderr.isatty()


def is_own_warning(category: type[Warning]) -> bool:
    """Whether a warning category is sao-online's own (shown even when quiet)."""
    return category.__module__.startswith("sao_online")


@contextlib.contextmanager
def quiet_other_libraries(verbose: bool = False) -> Iterator[None]:
    """While inside: other libraries' progress bars, logs and child-process warnings off.

    Environment variables set here are restored on exit; libraries already imported are told
    directly. With ``verbose`` nothing changes.
    """
    if verbose:
        before = os.environ.get(VERBOSE_VARIABLE)
        os.environ[VERBOSE_VARIABLE] = "1"
        try:
            yield
        finally:
            if before is None:
                os.environ.pop(VERBOSE_VARIABLE, None)
            else:
                os.environ[VERBOSE_VARIABLE] = before
        return
    saved = {name: os.environ.get(name) for name in QUIET_ENVIRONMENT}
    for name, value in QUIET_ENVIRONMENT.items():
        os.environ.setdefault(name, value)
    _quiet_imported_libraries()
    try:
        with warnings.catch_warnings():
            # Deprecation notices and the like from other libraries, in this process.
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", category=FutureWarning)
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _quiet_imported_libraries() -> None:
    """Libraries read the variables above once, at import: tell those already imported."""
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
    if "transformers" in sys.modules:
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        transformers_logging.set_verbosity_error()
