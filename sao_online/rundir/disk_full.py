"""A full disk, said in one line naming the file, wherever a run writes.

Writers fail on a full disk in their own ways: ``OSError`` with errno 28 from Python and
pyarrow, a ``SafetensorError`` whose text says "os error 28" from safetensors. The run's writers
(run directory tables, checkpoints, the lock, atomic text files) wrap each write in
:func:`reporting_a_full_disk`, which removes what the failed write left half-written and raises
:class:`DiskFullError` instead; the command line prints it as one line and exits with code 2.
Every write is atomic (a temporary name renamed into place), so what was logged before stays
whole, and ``--resume`` continues from the last checkpoint once there is space again.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

#: errno values that mean "no room": no space left, or a disk quota reached.
FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXT = ("No space left on device", "os error 28", "Disk quota exceeded", "os error 122")


class DiskFullError(OSError):
    """A write failed because the disk (or the user's quota) is full; the message names the
    file and says how to continue."""


def is_disk_full(error: BaseException) -> bool:
    """Whether ``error`` says the disk or quota is full (whatever library raised it)."""
    if isinstance(error, DiskFullError):
        return True
    if isinstance(error, OSError) and error.errno in FULL:
        return True
    return any(text in str(error) for text in _FULL_TEXT)


#: What to do after a run's write failed on a full disk: what it logged before is whole.
RESUME_ADVICE = (
    "what was logged before is whole: free some space and run again (--resume continues a run "
    "from its last checkpoint)"
)
#: ... and after the first write of a new run failed: there is nothing to resume yet.
START_ADVICE = "nothing of the run was logged yet: free some space and run the same command again"


@contextlib.contextmanager
def reporting_a_full_disk(
    target: Path, *partial: Path, advice: str = RESUME_ADVICE
) -> Iterator[None]:
    """Turn a full-disk failure of the writes inside into :class:`DiskFullError` naming
    ``target``, after removing ``partial`` (the temporary files or folders the write made).

    ``advice`` ends the message: what to do once there is space again, true for ``target``.

    Raises:
        DiskFullError: the disk or quota is full.
    """
    try:
        yield
    except Exception as error:
        if not is_disk_full(error):
            raise
        for leftover in partial:
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
            else:
                with contextlib.suppress(OSError):
                    leftover.unlink()
        raise DiskFullError(
            f"disk full: could not write {target} (no space left on its disk); {advice}"
        ) from None


def describe_disk_full(error: BaseException) -> str:
    """One line for a full-disk error from any writer: a :class:`DiskFullError` as it is;
    another names the file when the error carries it."""
    if isinstance(error, DiskFullError):
        return str(error)
    filename = getattr(error, "filename", None)
    if filename:
        return f"disk full: could not write {filename} (no space left on its disk)"
    reason = getattr(error, "strerror", None) or str(error).strip().splitlines()[0][:160]
    return f"disk full: {reason} (a write failed; the file is not known)"
