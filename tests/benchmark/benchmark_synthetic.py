"""Benchmark result folders built by hand, with known rewards, for the scoring tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pandas as pd

from sao_online.benchmark.protocol import FLOOR_METHOD, MIN_GAP, PROTOCOL_FORMAT
from sao_online.benchmark.results import CURVE_BINS, HALF_ORACLE
from sao_online.benchmark.runner import write_tables
from sao_online.benchmark.scores import normalized_scores
from sao_online.rundir.provenance import stable_hash

PROVENANCE = {
    "commit": "0" * 40,
    "dirty": False,
    "packages": {"sao-online": "0.1.0", "torch": "2.13.0"},
    "machine": {"cores": 2, "usable_cores": 2, "cpu_model": "test CPU", "gpus": []},
}


def record(
    task: str,
    family: str,
    method: str,
    seed: int,
    rewards: list[float],
    oracle: list[float],
    phase_length: int = 10,
    warm_start_seed: int | None = None,
) -> dict[str, Any]:
    """One run whose phase p has mean reward ``rewards[p]`` and oracle ``oracle[p]`` (from the
    warm start of ``warm_start_seed``, when given)."""
    phases, shifts, curve = [], [], []
    for phase, (reward, ceiling) in enumerate(zip(rewards, oracle)):
        start = phase * phase_length
        phases.append(
            {
                "phase": phase,
                "phase_name": f"regime {phase}",
                "start": float(start),
                "end": float(start + phase_length - 1),
                "episodes": phase_length,
                "reward_mean": reward,
                "oracle_mean": ceiling,
            }
        )
        curve.append(
            {
                "start": float(start),
                "end": float(start + phase_length),
                "episodes": phase_length,
                "reward_mean": reward,
            }
        )
        if phase:
            shifts.append(
                {
                    "shift": phase,
                    "tau": float(start),
                    "phase_before": f"regime {phase - 1}",
                    "phase_after": f"regime {phase}",
                    "time_to_half_oracle": float(phase_length) if reward < ceiling / 2 else 3.0,
                    "censored": bool(reward < ceiling / 2),
                    "time_available": float(phase_length),
                }
            )
    return {
        "key": {
            "task": task,
            "family": family,
            "method": method,
            "method_spec": method,
            "seed": seed,
            "tier": "smoke",
            **({} if warm_start_seed is None else {"warm_start_seed": warm_start_seed}),
        },
        "run": {
            "episodes": phase_length * len(rewards),
            "dropped_episodes": 0,
            "updates": 5,
            "seconds": 1.0,
            "action_tokens": 100.0,
        },
        "phases": phases,
        "shifts": shifts,
        "curve": curve,
        "config_hash": stable_hash([task, method, seed]),
        "provenance": copy.deepcopy(PROVENANCE),
    }


def protocol(tasks: dict[str, str], methods: list[str], budget: int = 20) -> dict[str, Any]:
    """A protocol with ``tasks`` (name -> family) and ``methods``."""
    return {
        "format": PROTOCOL_FORMAT,
        "suite": "test",
        "tier": "smoke",
        "score": {
            "floor": FLOOR_METHOD,
            "half_oracle": HALF_ORACLE,
            "min_gap": MIN_GAP,
            "curve_bins": CURVE_BINS,
        },
        "tasks": {
            name: {
                "family": family,
                "cpus": 1,
                "config": {"budget": {"episodes": budget}, "env": {"id": f"x/{name}-v0"}},
                "config_hash": stable_hash([name, budget]),
            }
            for name, family in tasks.items()
        },
        "methods": {
            method: {"spec": method, "algorithm": {name: {"name": method} for name in tasks}}
            for method in methods
        },
    }


def write_results(out: Path, records: list[dict[str, Any]], proto: dict[str, Any]) -> Path:
    write_tables(out, records, proto)
    return out


def tables_of(records: list[dict[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The (phases, runs) tables of ``records``, as a results folder holds them."""
    runs = pd.DataFrame([{**r["key"]} for r in records])
    phases = pd.DataFrame(
        [
            {**{k: r["key"][k] for k in ("task", "method", "seed")}, **p}
            for r in records
            for p in r["phases"]
        ]
    )
    return phases, runs


def scores_of(records: list[dict[str, Any]]) -> pd.DataFrame:
    """The normalized scores of ``records`` under the protocol's floor and gap."""
    return normalized_scores(*tables_of(records), floor_method=FLOOR_METHOD, min_gap=MIN_GAP)
