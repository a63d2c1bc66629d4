"""``make demo``: the StyleShift protocol on the asynchronous learner — SAO, its running-mean
ablation, GRPO and GRPO with DIS — and a report."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from sao_online.commands.compare import compare

DEMO_CONFIG = Path(str(resources.files("sao_online.configs") / "demo.yaml"))
# sao vs sao_running_mean: the critic; sao_running_mean vs grpo_dis: one rollout per prompt vs
# groups under the same objective (DIS); grpo_dis vs grpo: DIS vs the PPO clip.
DEMO_METHODS = ["sao", "sao_running_mean", "grpo_dis", "grpo"]


def run_demo(
    out: str | Path = "runs/demo",
    seeds: int = 3,
    first_seed: int = 0,
    quick: bool = False,
    fresh: bool = False,
) -> Path:
    """Run the demo protocol and write its report; return the report's path.

    Runs already in ``out`` continue from their checkpoints (finished ones are reused as they
    are), so an interrupted ``make demo`` picks up where it stopped; ``fresh`` starts again.

    Seeds ``first_seed`` .. ``first_seed + seeds - 1`` run; the README's two seed sets are the
    default (0-2) and ``first_seed=3``. ``quick`` shortens every phase to 160 episodes and uses
    two seeds: a smoke run of the whole pipeline, not a measurement.
    """
    from sao_online.analysis import write_report

    if not DEMO_CONFIG.exists():
        raise FileNotFoundError(f"demo config not found: {DEMO_CONFIG}")
    overrides: list[str] = []
    if quick:
        seeds = min(seeds, 2)
        overrides = [
            "budget.episodes=480",
            "schedule={clock: episodes, parameters: {"
            "preferred: {kind: abrupt, values: [cute, chuunibyou, classical], at: [0, 160, 320]}, "
            "pool: {kind: abrupt, values: [academic_cute_chuunibyou, academic_cute_chuunibyou, "
            "classical_cute_chuunibyou], at: [0, 160, 320]}}}",
        ]
    started = time.time()
    experiment_dir = compare(
        DEMO_CONFIG,
        methods=DEMO_METHODS,
        seeds=seeds,
        first_seed=first_seed,
        out=out,
        overrides=overrides,
        overwrite=fresh,
        resume=not fresh,
    )
    report = write_report(
        [experiment_dir],
        Path(out) / "report",
        title="StyleShift, asynchronous learner: SAO, running-mean baseline, GRPO with DIS, GRPO",
    )
    print(f"demo finished in {time.time() - started:.0f} s")
    return report
