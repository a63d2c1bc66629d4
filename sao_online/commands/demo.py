"""``make demo``: the StyleShift protocol, SAO vs GRPO vs the running-mean ablation, and a
report."""

from __future__ import annotations

import time
from importlib import resources
from pathlib import Path

from sao_online.commands.compare import compare

DEMO_CONFIG = Path(str(resources.files("sao_online.configs") / "demo.yaml"))
DEMO_METHODS = ["sao", "grpo", "sao_running_mean"]


def run_demo(
    out: str | Path = "runs/demo", seeds: int = 3, quick: bool = False, fresh: bool = False
) -> Path:
    """Run the demo protocol and write its report; return the report's path.

    Runs already in ``out`` continue from their checkpoints (finished ones are reused as they
    are), so an interrupted ``make demo`` picks up where it stopped; ``fresh`` starts again.

    ``quick`` shortens every phase to 160 episodes and uses two seeds: a smoke run of the whole
    pipeline, not a measurement.
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
        out=out,
        overrides=overrides,
        overwrite=fresh,
        resume=not fresh,
    )
    report = write_report(
        [experiment_dir],
        Path(out) / "report",
        title="StyleShift: SAO vs GRPO vs running-mean baseline",
    )
    print(f"demo finished in {time.time() - started:.0f} s")
    return report
