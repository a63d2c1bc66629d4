"""Per-run, per-shift recovery metrics: pre-shift level, drop, time to recovery, AUC, regret,
forgetting.

Definitions (t on the chosen x-axis; tau_k the k-th shift, k = 1..K; tau_{K+1} the end of the
data, i.e. the largest x observed; "the phase" is [tau_k, tau_{k+1})):

- Episodes flagged ``dropped`` (lost to a worker fault) and rows with a NaN reward are left out
  of every metric below.
- ``smoothed(t)``: the trailing moving average of :func:`trailing_mean` with width ``smooth``:
  mean reward of this phase's episodes with x in (t - smooth, t], undefined until
  ``min_window_fraction * smooth`` has elapsed since the phase started. Evaluated at each
  episode's x.
- ``pre_level``: mean reward of the episodes with x in [tau_k - window, tau_k), the window
  clipped at the previous shift (or the start of the data).
- ``drop``: pre_level minus the minimum of the smoothed curve over the phase;
  ``relative_drop`` = drop / pre_level.
- ``time_to_recovery``: the first episode time t >= tau_k in the phase at which the smoothed curve
  reaches rho * pre_level, minus tau_k (``recovered=True``, ``censored=False``). When the curve
  never reaches it before the next shift (or the end of the data) the value is right-censored:
  ``time_to_recovery = time_available = tau_{k+1} - tau_k`` with ``recovered=False``,
  ``censored=True``. Because the smoothed curve is undefined for its first
  ``min_window_fraction * smooth`` units, time_to_recovery is at least that much.
- ``time_to_oracle_fraction``: the same first-crossing time, for an absolute level: the smoothed
  curve reaching ``oracle_fraction`` (default 0.5) times the phase's mean oracle ceiling. Unlike
  ``time_to_recovery`` it does not flatter a method whose pre-shift plateau was low. Censored the
  same way (``oracle_fraction_censored``); NaN without an oracle ceiling.
- ``recovery_auc``: mean reward of the episodes with x in [tau_k, tau_k + horizon) (clipped to the
  phase) divided by pre_level: 1.0 means no loss at all over the horizon. This is the normalised
  area under the raw reward curve; the raw curve is used (not the smoothed one) because the area
  of a moving average equals the area of its input up to edge effects, and the smoothed curve is
  undefined at the start of the phase. ``recovery_auc_oracle`` divides the same mean reward by the
  mean ``oracle_reward`` of those episodes instead (fraction of the achievable reward).
  ``horizon_reward`` is that mean reward itself and ``horizon_episodes`` the number of episodes
  it averages; ``auc_horizon`` is the horizon, cut to the phase's length when shorter.
- ``dynamic_regret``: sum over the phase's episodes of ``oracle_reward - reward``;
  ``dynamic_regret_per_episode`` is its mean (comparable across phases of different length).
- ``forgetting`` (needs evals): for the phase that ended at tau_k (phase k-1), the eval reward on
  that phase at the end of that phase (the latest eval of it with world_time < tau_k, averaging
  rows at that time weighted by ``num_episodes``) minus the eval reward on it at the end of the
  run (its latest eval overall, which must be taken at or after tau_k). NaN without such evals.

When pre_level is NaN (no episode in the pre-shift window) or ``pre_level <= min_pre_level``
(nothing was learned before the shift, so a fraction of it means nothing), the relative metrics
``relative_drop``, ``time_to_recovery`` and ``recovery_auc`` are NaN (``recovered`` and
``censored`` False) and the ``note`` column says why; ``drop`` (absolute), regret and the oracle-
normalised AUC are still reported. ``note`` is empty for rows without caveats.

Defaults derived from the schedule (per run, on the chosen x-axis): with L the length of the
shortest phase that ends in a shift (phase 0 measured from the first episode),
``window = L / 4``, ``smooth = L / 10`` and ``horizon = L / 2``. On the world_time axis every
method of an experiment gets the same values; on tokens or seconds they scale with each run.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sao_online.analysis.smoothing import trailing_mean
from sao_online.analysis.time_axes import (
    ChangePointsArg,
    change_points_for_run,
    check_x_axis,
    iter_runs,
    phase_names_for_run,
    shift_positions,
    shortest_phase_length,
    x_values,
)
from sao_online.util.defaults import DEFAULT_ORACLE_FRACTION

RECOVERY_COLUMNS = [
    "experiment",
    "method",
    "seed",
    "change_point",
    "phase_before",
    "phase_after",
    "x_axis",
    "tau",
    "tau_clock",
    "pre_window",
    "smooth_window",
    "pre_level",
    "pre_episodes",
    "min_level",
    "drop",
    "relative_drop",
    "time_to_recovery",
    "recovered",
    "censored",
    "time_available",
    "time_to_oracle_fraction",
    "oracle_fraction_censored",
    "recovery_auc",
    "recovery_auc_oracle",
    "auc_horizon",
    "horizon_reward",
    "horizon_episodes",
    "dynamic_regret",
    "dynamic_regret_per_episode",
    "phase_episodes",
    "forgetting",
    "note",
]

# Fractions of the shortest phase used when window / smooth / horizon are not given.
DEFAULT_WINDOW_FRACTION = 0.25
DEFAULT_SMOOTH_FRACTION = 0.1
DEFAULT_HORIZON_FRACTION = 0.5


def recovery_metrics(
    df: pd.DataFrame,
    change_points: ChangePointsArg = None,
    window: float | None = None,
    rho: float = 0.9,
    horizon: float | None = None,
    x: str = "world_time",
    smooth: float | None = None,
    *,
    evals: pd.DataFrame | None = None,
    min_pre_level: float = 0.05,
    min_window_fraction: float = 0.5,
    phase_names: Sequence[str] | None = None,
    oracle_fraction: float = DEFAULT_ORACLE_FRACTION,
) -> pd.DataFrame:
    """Recovery metrics for every (experiment, method, seed, change point).

    The precise definitions are in this module's docstring (``sao_online.analysis.recovery``).

    Args:
        df: episodes from :func:`load_runs` (needs ``experiment``, ``method``, ``seed``,
            ``world_time``, ``reward``; ``oracle_reward`` for regret, ``dropped`` honoured).
        change_points: shift times in clock (world_time) units: one list for every run, or
            experiment -> list. Default: each run's config (kept by load_runs in
            ``df.attrs``), else the first world_time of each new ``phase`` value.
        window: clock units before each shift averaged into ``pre_level`` (x-axis units).
        rho: fraction of pre_level the smoothed curve must reach to count as recovered.
        horizon: x-axis units after each shift averaged into ``recovery_auc``.
        x: ``"world_time"``, ``"tokens"`` or ``"seconds"``
            (see :mod:`sao_online.analysis.time_axes`).
        smooth: width of the trailing moving average (x-axis units).
        evals: the evals table (from ``load_runs(..., table="evals")``) for ``forgetting``.
        min_pre_level: pre-shift levels at or below this (reward units; the suite's rewards lie
            in [0, 1]) make the relative metrics undefined.
        min_window_fraction: fraction of ``smooth`` that must elapse after a shift before the
            smoothed curve is defined.
        phase_names: names for phases 0..K (default: the run config's, else ``phase <k>``).
        oracle_fraction: the absolute recovery level, as a fraction of the phase's mean oracle
            ceiling, for ``time_to_oracle_fraction``.

    Returns:
        One row per run and change point with the columns of ``RECOVERY_COLUMNS``;
        ``change_point`` counts shifts from 1 (shift k starts phase k).

    Raises:
        ValueError: missing columns, an unknown x-axis or out-of-range parameters.

    Example:
        >>> metrics = recovery_metrics(load_runs("runs/style-shift"))  # doctest: +SKIP
        >>> metrics.groupby("method").time_to_recovery.median()        # doctest: +SKIP
    """
    for column in ("world_time", "reward"):
        if column not in df.columns:
            raise ValueError(f"recovery_metrics needs the episode column {column!r}")
    check_x_axis(x, df)
    if not rho > 0:
        raise ValueError(f"rho must be positive, got {rho}")
    if not 0 < oracle_fraction <= 1:
        raise ValueError(f"oracle_fraction must be in (0, 1], got {oracle_fraction}")
    for name, value in (("window", window), ("horizon", horizon), ("smooth", smooth)):
        if value is not None and not (np.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a positive number of {x} units, got {value}")

    rows: list[dict] = []
    for key, run in iter_runs(df):
        taus_clock = change_points_for_run(df, run, key, change_points)
        names = phase_names_for_run(df, key, len(taus_clock) + 1, phase_names)
        run_evals = _evals_of_run(evals, key)
        rows.extend(
            _run_rows(
                run,
                key,
                taus_clock,
                names,
                x=x,
                window=window,
                rho=rho,
                horizon=horizon,
                smooth=smooth,
                evals=run_evals,
                min_pre_level=min_pre_level,
                min_window_fraction=min_window_fraction,
                oracle_fraction=oracle_fraction,
            )
        )
    return pd.DataFrame(rows, columns=RECOVERY_COLUMNS)


def _run_rows(
    run: pd.DataFrame,
    key: tuple,
    taus_clock: list[float],
    names: list[str],
    *,
    x: str,
    window: float | None,
    rho: float,
    horizon: float | None,
    smooth: float | None,
    evals: pd.DataFrame | None,
    min_pre_level: float,
    min_window_fraction: float,
    oracle_fraction: float,
) -> list[dict]:
    if not len(run) or not taus_clock:
        return []
    world_times = run["world_time"].to_numpy(dtype=float)
    xs = x_values(run, x)
    rewards = run["reward"].to_numpy(dtype=float)
    oracle = (
        run["oracle_reward"].to_numpy(dtype=float)
        if "oracle_reward" in run
        else np.full(len(run), np.nan)
    )
    usable = np.isfinite(rewards)
    if "dropped" in run:
        usable &= ~run["dropped"].fillna(False).to_numpy(dtype=bool)

    positions = shift_positions(world_times, xs, taus_clock, x)
    # a shift after the last episode has nothing to measure
    shifts = [
        (k, tau_clock, tau)
        for k, (tau_clock, tau) in enumerate(zip(taus_clock, positions), start=1)
        if np.isfinite(tau)
    ]
    if not shifts:
        return []
    start, end = float(xs.min()), float(xs.max())
    boundaries = [start] + [tau for _, _, tau in shifts]
    shortest = shortest_phase_length(start, boundaries[1:], end)
    window = window or DEFAULT_WINDOW_FRACTION * shortest
    smooth = smooth or DEFAULT_SMOOTH_FRACTION * shortest
    horizon = horizon or DEFAULT_HORIZON_FRACTION * shortest

    taus = [tau for _, _, tau in shifts]
    smoothed = np.full(len(run), np.nan)
    smoothed[usable] = trailing_mean(
        xs[usable],
        rewards[usable],
        smooth,
        phase_starts=taus,
        min_window_fraction=min_window_fraction,
    )

    rows = []
    for index, (k, tau_clock, tau) in enumerate(shifts):
        is_last = index == len(shifts) - 1
        phase_end = end if is_last else taus[index + 1]
        in_phase = (xs >= tau) & ((xs <= end) if is_last else (xs < phase_end))
        pre = (xs >= max(tau - window, boundaries[index])) & (xs < tau)
        metrics = shift_metrics(
            xs,
            rewards,
            oracle,
            smoothed,
            phase=usable & in_phase,
            pre=usable & pre,
            tau=tau,
            time_available=phase_end - tau,
            horizon=horizon,
            rho=rho,
            min_pre_level=min_pre_level,
            oracle_fraction=oracle_fraction,
        )
        rows.append(
            {
                "experiment": key[0],
                "method": key[1],
                "seed": int(key[2]),
                "change_point": k,
                "phase_before": names[k - 1],
                "phase_after": names[k],
                "x_axis": x,
                "tau": tau,
                "tau_clock": tau_clock,
                "pre_window": window,
                "smooth_window": smooth,
                **metrics,
                "forgetting": _forgetting(evals, phase=k - 1, phase_end_clock=tau_clock),
            }
        )
    return rows


def first_crossing(
    times: np.ndarray, curve: np.ndarray, threshold: float, time_available: float
) -> tuple[float, bool, bool]:
    """When a curve first reaches ``threshold``, measured from the start of its phase.

    Args:
        times: x of each point, relative to the shift (0 = the shift).
        curve: the smoothed reward at each point; NaN where undefined (skipped).
        threshold: the level to reach (reached when within 1e-9 relative of it, or above).
        time_available: the phase's length, the censoring value.

    Returns:
        ``(time, reached, censored)``: the earliest time with ``curve >= threshold``, True, False;
        or ``(time_available, False, True)`` when it never does; ``(nan, False, False)`` when the
        curve is nowhere defined.

    Example:
        >>> first_crossing(np.array([3.0, 1.0, 2.0]), np.array([0.9, 0.2, 0.8]), 0.8, 10.0)
        (2.0, True, False)
    """
    defined = np.isfinite(curve)
    if not defined.any():
        return np.nan, False, False
    order = np.argsort(times[defined], kind="stable")
    times_sorted = times[defined][order]
    reached = curve[defined][order] >= threshold - 1e-9 * abs(threshold)
    if reached.any():
        return float(times_sorted[np.argmax(reached)]), True, False
    return float(time_available), False, True


def shift_metrics(
    xs: np.ndarray,
    rewards: np.ndarray,
    oracle: np.ndarray,
    smoothed: np.ndarray,
    *,
    phase: np.ndarray,
    pre: np.ndarray,
    tau: float,
    time_available: float,
    horizon: float,
    rho: float,
    min_pre_level: float,
    oracle_fraction: float,
) -> dict:
    """The metrics of one shift of one run from its episode arrays (module docstring).

    Args:
        xs, rewards, oracle, smoothed: per episode: x, reward, oracle ceiling, smoothed reward.
        phase: mask of the usable episodes of the phase the shift starts.
        pre: mask of the usable episodes in the pre-shift window.
        tau: the shift's x; time_available: the phase's length.
        horizon, rho, min_pre_level, oracle_fraction: as in :func:`recovery_metrics`.

    Returns:
        The metric columns of ``RECOVERY_COLUMNS`` (everything but the run's keys, the shift's
        position and windows, and forgetting).
    """
    notes = []
    pre_level = float(rewards[pre].mean()) if pre.any() else np.nan
    pre_ok = np.isfinite(pre_level) and pre_level > min_pre_level
    if not np.isfinite(pre_level):
        notes.append("no episodes in the pre-shift window")
    elif not pre_ok:
        notes.append(
            f"pre_level <= min_pre_level ({min_pre_level:g}): nothing learned "
            f"before the shift, relative metrics undefined"
        )

    phase_times, phase_curve = xs[phase] - tau, smoothed[phase]
    defined = np.isfinite(phase_curve)
    if not defined.any():
        notes.append("phase shorter than the smoothing warm-up: no smoothed values")
    min_level = float(phase_curve[defined].min()) if defined.any() else np.nan
    drop = pre_level - min_level

    time_to_recovery, recovered, censored = np.nan, False, False
    if pre_ok:
        time_to_recovery, recovered, censored = first_crossing(
            phase_times, phase_curve, rho * pre_level, time_available
        )
    ceiling = float(np.nanmean(oracle[phase])) if np.isfinite(oracle[phase]).any() else np.nan
    time_to_oracle, oracle_censored = np.nan, False
    if np.isfinite(ceiling) and ceiling > 0:
        time_to_oracle, _, oracle_censored = first_crossing(
            phase_times, phase_curve, oracle_fraction * ceiling, time_available
        )

    auc_horizon = min(horizon, time_available) if time_available > 0 else horizon
    in_horizon = phase & (xs < tau + horizon)
    horizon_reward = float(rewards[in_horizon].mean()) if in_horizon.any() else np.nan
    horizon_oracle = float(oracle[in_horizon].mean()) if in_horizon.any() else np.nan
    regret = oracle[phase] - rewards[phase]
    return {
        "pre_level": pre_level,
        "pre_episodes": int(pre.sum()),
        "min_level": min_level,
        "drop": drop,
        "relative_drop": drop / pre_level if pre_ok else np.nan,
        "time_to_recovery": time_to_recovery,
        "recovered": recovered,
        "censored": censored,
        "time_available": time_available,
        "time_to_oracle_fraction": time_to_oracle,
        "oracle_fraction_censored": oracle_censored,
        "recovery_auc": horizon_reward / pre_level if pre_ok else np.nan,
        "recovery_auc_oracle": (
            horizon_reward / horizon_oracle
            if np.isfinite(horizon_oracle) and horizon_oracle > 0
            else np.nan
        ),
        "auc_horizon": auc_horizon,
        "horizon_reward": horizon_reward,
        "horizon_episodes": int(in_horizon.sum()),
        "dynamic_regret": float(regret.sum()) if len(regret) else np.nan,
        "dynamic_regret_per_episode": float(regret.mean()) if len(regret) else np.nan,
        "phase_episodes": int(phase.sum()),
        "note": "; ".join(notes),
    }


def _evals_of_run(evals: pd.DataFrame | None, key: tuple) -> pd.DataFrame | None:
    if evals is None or not len(evals):
        return None
    needed = ["experiment", "method", "seed", "world_time", "eval_phase", "mean_reward"]
    missing = [column for column in needed if column not in evals.columns]
    if missing:
        raise ValueError(f"evals lacks the column(s) {', '.join(missing)}")
    mask = (evals["experiment"] == key[0]) & (evals["method"] == key[1]) & (evals["seed"] == key[2])
    return evals[mask]


def _forgetting(evals: pd.DataFrame | None, *, phase: int, phase_end_clock: float) -> float:
    """Eval reward on ``phase`` at its end minus eval reward on it at the end of the run."""
    if evals is None or not len(evals):
        return np.nan
    of_phase = evals[evals["eval_phase"] == phase]
    during = of_phase[of_phase["world_time"] < phase_end_clock]
    if not len(during) or not (of_phase["world_time"] >= phase_end_clock).any():
        return np.nan
    return _eval_reward_at(during, during["world_time"].max()) - _eval_reward_at(
        of_phase, of_phase["world_time"].max()
    )


def _eval_reward_at(evals: pd.DataFrame, time: float) -> float:
    at_time = evals[evals["world_time"] == time]
    rewards = at_time["mean_reward"].to_numpy(dtype=float)
    if "num_episodes" in at_time:
        weights = at_time["num_episodes"].to_numpy(dtype=float)
        if np.isfinite(weights).all() and weights.sum() > 0:
            return float(np.average(rewards, weights=weights))
    return float(rewards.mean())
