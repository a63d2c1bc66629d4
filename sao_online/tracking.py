"""Experiment tracking: TensorBoard event files and a sample of episode transcripts per run.

- ``logging.tensorboard: true`` writes TensorBoard event files under ``<run>/tensorboard/``:
  every numeric column of the update table (``losses/``, ``charts/``, ``staleness/``, ...) and
  per-update episode means (``episodes/reward``, ``episodes/truncated``, ...), all at the
  learner version as the step. ``tensorboard --logdir runs`` shows every run of an experiment.
  Needs the ``tensorboard`` package (``pip install 'sao-online[tensorboard]'``).
- ``logging.transcripts_every: N`` keeps every N-th trained episode as text in
  ``<run>/transcripts.jsonl``: prompt, then each action with the observation that answered it
  and the reward of the turn, plus phase, theta, behaviour and the episode reward.
  ``sao-online show RUN`` prints some.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sao_online.runlog import write_text_atomically
from sao_online.types import Trajectory

TENSORBOARD_DIR = "tensorboard"
TRANSCRIPTS_FILE = "transcripts.jsonl"
# Chat-template role markers (<|user|>, <|im_start|>, ...) are layout, not what anyone wrote.
_TEMPLATE_MARKER = re.compile(r"<\|[A-Za-z_]{1,24}\|>")


def _segments(mask: Sequence[bool]) -> list[tuple[bool, int, int]]:
    """Runs of equal ``mask`` values as (is_action, start, end)."""
    runs: list[tuple[bool, int, int]] = []
    start = 0
    for index in range(1, len(mask) + 1):
        if index == len(mask) or mask[index] != mask[start]:
            runs.append((bool(mask[start]), start, index))
            start = index
    return runs


def _text(tokenizer: Any, ids: list[int]) -> str:
    text = tokenizer.decode(ids, skip_special_tokens=True)
    return _TEMPLATE_MARKER.sub("\n", text).strip()


def transcript(trajectory: Trajectory, tokenizer: Any, episode: int) -> dict[str, Any]:
    """One episode as readable text: the prompt and its turns, with regime and rewards.

    Returns:
        ``episode``, ``phase``, ``theta``, ``behavior``, ``reward``, ``terminated``,
        ``truncated``, ``prompt`` and ``turns`` (each ``action``, ``observation`` — the
        environment's answer, ``""`` after the last action — and ``reward``).
    """
    tokens = trajectory.tokens.tolist()
    mask = trajectory.action_mask.tolist()
    rewards = trajectory.rewards.tolist()
    prompt, turns = "", []
    for is_action, start, end in _segments(mask):
        if is_action:
            turns.append(
                {
                    "action": _text(tokenizer, tokens[start:end]),
                    "observation": "",
                    "reward": float(sum(rewards[start:end])),
                }
            )
        elif turns:
            turns[-1]["observation"] = _text(tokenizer, tokens[start:end])
        else:
            prompt = _text(tokenizer, tokens[start:end])
    return {
        "episode": int(episode),
        "phase": int(trajectory.phase),
        "theta": dict(trajectory.theta),
        "behavior": trajectory.behavior,
        "reward": float(trajectory.total_reward),
        "terminated": bool(trajectory.terminated),
        "truncated": bool(trajectory.truncated),
        "prompt": prompt,
        "turns": turns,
    }


class TranscriptLog:
    """Appends every ``every``-th trained episode's transcript to ``transcripts.jsonl``.

    Args:
        run_dir: the run directory.
        tokenizer: the policy's tokenizer.
        every: keep episodes whose index is a multiple of ``every`` (0: keep none).
        keep_before: on resume, the episodes logged at the checkpoint; later lines (episodes
            the resumed session runs again) are removed so none is duplicated.
    """

    def __init__(
        self, run_dir: str | Path, tokenizer: Any, every: int, keep_before: int | None = None
    ) -> None:
        self.path = Path(run_dir) / TRANSCRIPTS_FILE
        self.tokenizer = tokenizer
        self.every = every
        if keep_before is not None and self.path.exists():
            kept = [line for line in read_transcripts(self.path) if line["episode"] < keep_before]
            write_text_atomically(self.path, "".join(json.dumps(r) + "\n" for r in kept))

    def add(self, trajectories: Sequence[Trajectory], first_episode: int) -> None:
        """Log the sampled ones of ``trajectories``, numbered from ``first_episode``."""
        if self.every <= 0:
            return
        lines = [
            json.dumps(transcript(t, self.tokenizer, first_episode + k)) + "\n"
            for k, t in enumerate(trajectories)
            if (first_episode + k) % self.every == 0
        ]
        if lines:
            with self.path.open("a") as handle:
                handle.writelines(lines)


def read_transcripts(path: str | Path) -> list[dict[str, Any]]:
    """The transcripts of a run (``path``: the run directory or its ``transcripts.jsonl``)."""
    path = Path(path)
    if path.is_dir():
        path = path / TRANSCRIPTS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def format_transcript(record: dict[str, Any]) -> str:
    """A transcript as indented text for the terminal."""
    theta = ", ".join(f"{k}={v}" for k, v in sorted(record["theta"].items()))
    end = "truncated" if record["truncated"] else "terminated" if record["terminated"] else "open"
    lines = [
        f"episode {record['episode']} | phase {record['phase']} ({theta}) | reward "
        f"{record['reward']:+.3f} | behaviour {record['behavior'] or '-'} | {end}",
        "  prompt: " + record["prompt"].replace("\n", "\n          "),
    ]
    for number, turn in enumerate(record["turns"], start=1):
        lines.append(f"  action {number}: {turn['action']!r}  (reward {turn['reward']:+.3f})")
        if turn["observation"]:
            lines.append("    env: " + turn["observation"].replace("\n", "\n         "))
    return "\n".join(lines)


def _episode_scalars(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    count = max(len(trajectories), 1)
    return {
        "episodes/reward": sum(t.total_reward for t in trajectories) / count,
        "episodes/truncated": sum(bool(t.truncated) for t in trajectories) / count,
        "episodes/turns": sum(t.num_turns for t in trajectories) / count,
        "episodes/action_tokens": sum(t.num_action_tokens for t in trajectories) / count,
    }


class TensorBoardLog:
    """Scalars of each update and of its episodes, as TensorBoard event files.

    Args:
        run_dir: the run directory; events go to ``<run_dir>/tensorboard/``.
        first_step: the learner version the session starts at; on resume, events an earlier
            session wrote at later steps are discarded by TensorBoard (``purge_step``).

    Raises:
        ImportError: naming the package to install when ``tensorboard`` is missing.
    """

    def __init__(self, run_dir: str | Path, first_step: int = 0) -> None:
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as error:  # torch's writer needs the tensorboard package
            raise ImportError(
                "logging.tensorboard: needs the tensorboard package; pip install "
                "'sao-online[tensorboard]' (or pip install tensorboard)"
            ) from error
        self.directory = Path(run_dir) / TENSORBOARD_DIR
        self.writer = SummaryWriter(
            str(self.directory), purge_step=first_step if first_step > 0 else None
        )

    def log_update(
        self, metrics: dict[str, Any], trajectories: Iterable[Trajectory], step: int
    ) -> None:
        """Write the update's numeric metrics and its episodes' means at ``step``."""
        scalars = {**metrics, **_episode_scalars(list(trajectories))}
        for name, value in scalars.items():
            if name == "version" or isinstance(value, bool):
                continue
            if isinstance(value, int | float) and math.isfinite(value):
                self.writer.add_scalar(name, float(value), global_step=step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()
