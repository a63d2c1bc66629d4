"""``sao-online show``: the episode transcripts a run kept, spread over the run."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_show_parser(commands: argparse._SubParsersAction) -> None:
    show = commands.add_parser(
        "show",
        help="print episode transcripts a run kept (what the "
        "agent wrote, what the env answered, rewards)",
    )
    show.add_argument("run", help="a run directory (or a folder of runs)")
    show.add_argument(
        "-n", "--count", type=int, default=3, help="transcripts per run (spread over the run)"
    )
    show.add_argument("--phase", type=int, default=None, help="only episodes of this phase")
    show.set_defaults(func=_show_command)


def _show_command(args: argparse.Namespace) -> int:
    print_transcripts(Path(args.run), count=args.count, phase=args.phase)
    return 0


def print_transcripts(root: Path, count: int = 3, phase: int | None = None) -> None:
    """Print up to ``count`` transcripts of each run under ``root`` (of ``phase`` only, if given).

    Raises:
        FileNotFoundError: ``root`` is not a folder, or holds no transcripts file.
    """
    # Here, not on top: the command line builds its parser without torch.
    from sao_online.rundir.tracking import TRANSCRIPTS_FILE, format_transcript, read_transcripts

    if not root.is_dir():
        raise FileNotFoundError(f"show: no run directory {root}")
    files = (
        [root / TRANSCRIPTS_FILE]
        if (root / TRANSCRIPTS_FILE).exists()
        else sorted(root.rglob(TRANSCRIPTS_FILE))
    )
    if not files:
        raise FileNotFoundError(
            f"show: no {TRANSCRIPTS_FILE} under {root} (runs keep one when "
            "logging.transcripts_every > 0)"
        )
    for path in files:
        records = [r for r in read_transcripts(path) if phase is None or r["phase"] == phase]
        if not records:
            print(
                f"== {path.parent}: no transcript"
                + (f" in phase {phase}" if phase is not None else "")
            )
            continue
        # Spread over the run (first, last and evenly between) so drift shows.
        shown = min(count, len(records))
        picks = sorted({round(k * (len(records) - 1) / max(shown - 1, 1)) for k in range(shown)})
        print(f"== {path.parent} ({len(records)} transcripts, showing {len(picks)})")
        for index in picks:
            print(format_transcript(records[index]))
            print()
