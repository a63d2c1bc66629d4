"""Experiment tracking: TensorBoard event files and a sample of episode transcripts per run.

- ``logging.tensorboard: true`` writes TensorBoard event files under ``<run>/tensorboard/``:
  every numeric column of the update table (``losses/``, ``charts/``, ``staleness/``, ...),
  per-update episode means (``episodes/reward``, ``episodes/truncated``, ...) and the drift the
  update's episodes ran under (``drift/phase`` and ``drift/<name>`` for each numeric drift
  parameter, batch means: a shift shows as a step), all at the learner version as the step.
  ``tensorboard --logdir runs`` shows every run of an experiment. Needs the ``tensorboard``
  package (``pip install 'sao-online[tensorboard]'``).
- ``logging.wandb: true`` sends the same series, and the run's resolved config, to Weights &
  Biases (``pip install 'sao-online[wandb]'``), see :class:`WandbLog`.
- ``logging.transcripts_every: N`` keeps every N-th trained episode as text in
  ``<run>/transcripts.jsonl``: prompt, then each action with the observation that answered it
  and the reward of the turn, plus phase, theta, behaviour and the episode reward.
  ``sao-online show RUN`` prints some.
"""

from __future__ import annotations

import json
import math
import netrc
import os
import re
import secrets
import socket
import sys
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from sao_online.learning.types import Trajectory
from sao_online.rundir.layout import write_text_atomically

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
        environment's answer, to the last action too, ``""`` where it gave none — and
        ``reward``).
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
    if turns and not turns[-1]["observation"]:  # the answer to the last action: in no token
        turns[-1]["observation"] = trajectory.final_observation
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


def _is_number(value: Any) -> bool:
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def drift_scalars(trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """``drift/phase`` and ``drift/<name>`` per numeric drift parameter: means over the batch.

    A batch inside one phase has that phase's values; one that straddles a shift has values
    between the two. Choice parameters (text) are not numbers: the phase shows their shifts.
    """
    if not trajectories:
        return {}
    scalars = {"drift/phase": sum(t.phase for t in trajectories) / len(trajectories)}
    names = sorted({name for t in trajectories for name, v in t.theta.items() if _is_number(v)})
    for name in names:
        values = [float(t.theta[name]) for t in trajectories if _is_number(t.theta.get(name))]
        scalars[f"drift/{name}"] = sum(values) / len(values)
    return scalars


def update_scalars(metrics: dict[str, Any], trajectories: Sequence[Trajectory]) -> dict[str, float]:
    """The series every tracker gets for one update: the update's numeric metrics, its
    episodes' means (``episodes/``) and the drift they ran under (``drift/``)."""
    scalars = {**metrics, **_episode_scalars(trajectories), **drift_scalars(trajectories)}
    return {
        name: float(value)
        for name, value in scalars.items()
        if name != "version" and _is_number(value)
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
        """Write the update's series (:func:`update_scalars`) at ``step``."""
        for name, value in update_scalars(metrics, list(trajectories)).items():
            self.writer.add_scalar(name, value, global_step=step)

    def close(self) -> None:
        self.writer.flush()
        self.writer.close()


#: The file of a run directory that keeps its W&B run id, so a resumed run continues it.
WANDB_ID_FILE = "wandb_run_id"
#: The W&B project when ``WANDB_PROJECT`` is not set.
WANDB_DEFAULT_PROJECT = "sao-online"


def _wandb_host() -> str:
    from urllib.parse import urlparse

    return urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or ""


def _has_wandb_key() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators(_wandb_host()) is not None
    except (OSError, netrc.NetrcParseError):
        return False


def _reachable(host: str, port: int = 443, timeout: float = 3.0) -> bool:
    """Whether a TCP connection to ``host`` opens within ``timeout`` (name lookup included)."""
    outcome: list[bool] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=attempt, daemon=True)  # a lookup can outlast any timeout
    thread.start()
    thread.join(timeout)
    return bool(outcome and outcome[0])


def wandb_mode() -> str:
    """``WANDB_MODE`` when set; else ``online`` with an API key and the server reachable, else
    ``offline`` (the run is kept under ``<run>/wandb/``; ``wandb sync`` uploads it later)."""
    if os.environ.get("WANDB_MODE"):
        return os.environ["WANDB_MODE"]
    if _has_wandb_key() and _reachable(_wandb_host()):
        return "online"
    return "offline"


class WandbLog:
    """The series of :class:`TensorBoardLog`, and the run's config, as a Weights & Biases run.

    The run is named ``<experiment>/<method>/seed-<k>`` and grouped by experiment, in the
    project ``$WANDB_PROJECT`` (default ``sao-online``). It goes online when an API key is set
    up and the server answers, offline otherwise (:func:`wandb_mode`); its files live under
    ``<run_dir>/wandb/``. A resumed run continues the same W&B run (the id is kept in
    ``<run_dir>/wandb_run_id``); steps an earlier session logged past the checkpoint are not
    logged again.

    Args:
        run_dir: the run directory.
        config: the run's resolved config (its ``config.yaml``).

    Raises:
        ImportError: naming the package to install when ``wandb`` is missing.
    """

    def __init__(self, run_dir: str | Path, config: dict[str, Any]) -> None:
        try:
            import wandb
        except ImportError as error:
            raise ImportError(
                "logging.wandb: needs the wandb package; pip install 'sao-online[wandb]' "
                "(or pip install wandb)"
            ) from error
        run_dir = Path(run_dir)
        id_file = run_dir / WANDB_ID_FILE
        run_id = id_file.read_text().strip() if id_file.exists() else secrets.token_hex(6)
        write_text_atomically(id_file, run_id)
        self.mode = wandb_mode()
        self.run = wandb.init(
            project=os.environ.get("WANDB_PROJECT", WANDB_DEFAULT_PROJECT),
            name=f"{config.get('experiment')}/{config.get('method')}/seed-{config.get('seed')}",
            group=str(config.get("experiment")),
            job_type=str(config.get("method")),
            config=config,
            dir=str(run_dir),
            id=run_id,
            resume="allow",
            mode=self.mode,
            settings=wandb.Settings(silent=True, console="off"),
        )
        self.last_step = int(getattr(self.run, "step", 0)) - 1  # a resumed run's last step
        where = "" if self.mode != "offline" else f" (offline, `wandb sync {run_dir / 'wandb'}`)"
        print(f"wandb: run {self.run.name} in project {self.run.project}{where}", file=sys.stderr)

    def log_update(
        self, metrics: dict[str, Any], trajectories: Iterable[Trajectory], step: int
    ) -> None:
        """Log the update's series (:func:`update_scalars`) at ``step``."""
        if step <= self.last_step:  # W&B keeps steps increasing
            return
        self.run.log(update_scalars(metrics, list(trajectories)), step=step)
        self.last_step = step

    def close(self) -> None:
        self.run.finish()
