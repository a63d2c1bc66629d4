"""A clear error for the missing ``if __name__ == "__main__":`` guard.

The local backend and ``compare`` start their processes as spawn does (from a forkserver,
``processes.py``): each child imports the parent's main script again. A script that starts a
run at top level then starts it again in each child, whose workers do the same: without a guard
the run never gets going and only reports that its workers keep dying. Both sides are checked
here: a child that finds itself starting a run while it imports the main script stops with
this message, and the parent refuses to start children from a script file that has no guard at
all.
"""

from __future__ import annotations

import multiprocessing
import re
import sys
from pathlib import Path

_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


class MissingMainGuardError(RuntimeError):
    """Processes would be spawned from a script whose run is not under a ``__main__`` guard."""


def _message(what: str, script: str) -> str:
    return (
        f"{what} starts processes that run your script {script} again in each "
        'of them; put the code that starts runs under `if __name__ == "__main__":` (see the '
        "README's Python API section), or use runtime.backend: sync"
    )


def importing_main_in_child() -> bool:
    """True while a child process is importing the parent's main script."""
    # multiprocessing's own check for the same mistake reads this flag (spawn.py; forkserver
    # children start through the same code).
    return multiprocessing.parent_process() is not None and bool(
        getattr(multiprocessing.current_process(), "_inheriting", False)
    )


def require_main_guard(what: str) -> None:
    """Raise :class:`MissingMainGuardError` before ``what`` spawns processes that would loop.

    Args:
        what: the caller, for the message (``"the local backend"``, ``"compare"``).
    """
    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if importing_main_in_child():
        raise MissingMainGuardError(_message(what, script or "(the main module)"))
    if not script or not str(script).endswith(".py"):
        return  # an interactive session, `python -c`, or a console script: nothing re-runs
    try:
        source = Path(script).read_text(errors="replace")
    except OSError:
        return
    if not _GUARD.search(source):
        raise MissingMainGuardError(_message(what, script))
