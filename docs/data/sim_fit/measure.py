"""The fitted-versus-real comparison on the demo's config, kept with its provenance.

Usage: python docs/data/sim_fit/measure.py RUNS_FOLDER [--busy-ok]

From a committed tree, on a quiet machine (refused otherwise, as ``performance_page --measure``
refuses): real runs of the demo's config on the local backend (SAO, seeds 0 and 1, one after
the other), a cost model fitted to seed 0's timings (``sao-online sim fit``), the simulated runs
of the same config on that cost model (seeds 0 and 1), and what each runtime did side by side
(``sao-online sim compare``'s profile). Writes, beside this script: ``fitted.yaml`` (the fit),
``profiles.csv`` (one row per run) and ``provenance.json`` (commit, packages, machine, load),
then rewrites the tables of ``docs/guides/simulated-runtime.md`` (``table.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from sao_online.commands.performance_keep import QUIET_LOAD, MachineWatch, load_in_words
from sao_online.commands.sim import runtime_profile
from sao_online.rundir.provenance import provenance, source_state

HERE = Path(__file__).resolve().parent
SEEDS = (0, 1)
FITTED_SEED = 0


def sao_online(*arguments: str) -> None:
    script = Path(sys.executable).parent / "sao-online"
    subprocess.run([str(script), *arguments], check=True)


def measure(out: Path) -> list[dict]:
    for seed in SEEDS:
        sao_online("run", "demo", "--set", f"seed={seed}", "--out", str(out / f"real/seed-{seed}"))
    real = out / f"real/seed-{FITTED_SEED}"
    fitted = subprocess.run(
        [str(Path(sys.executable).parent / "sao-online"), "sim", "fit", str(real)],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    (HERE / "fitted.yaml").write_text(fitted)
    sao_online("sim", "fit", str(real), "--out", str(out / "simulated.yaml"))
    for seed in SEEDS:
        sao_online(
            "run",
            str(out / "simulated.yaml"),
            "--set",
            f"seed={seed}",
            "--out",
            str(out / f"simulated/seed-{seed}"),
        )
    rows = []
    for backend in ("real", "simulated"):
        for seed in SEEDS:
            profile = runtime_profile(out / backend / f"seed-{seed}")
            shares = profile.pop("staleness_shares")
            waits = profile.pop("learner_wait_shares")
            rows.append(
                {
                    "seed": seed,
                    **{k: v for k, v in profile.items() if k != "run"},
                    **{f"staleness_share_{k}": v for k, v in shares.items()},
                    **{f"learner_wait_{k}_share": v for k, v in waits.items()},
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="a folder for the runs")
    parser.add_argument("--busy-ok", action="store_true", help="measure on a busy machine")
    args = parser.parse_args()
    if source_state()["dirty"]:
        print("measure.py: the tree has uncommitted changes; commit them first", file=sys.stderr)
        return 2
    if os.getloadavg()[0] >= QUIET_LOAD and not args.busy_ok:
        print(f"measure.py: the machine is busy (load {os.getloadavg()[0]:.2f})", file=sys.stderr)
        return 2
    os.environ["OMP_NUM_THREADS"] = "1"
    with MachineWatch() as watch:
        rows = measure(args.out)
    pd.DataFrame(rows).to_csv(HERE / "profiles.csv", index=False)
    load = watch.summary()
    record = {
        "what": "the demo's config (configs/demo.yaml as written: StyleShift, 3,000 episodes, "
        "local backend, two rollout workers, latency mean 0.2 s sigma 1, max staleness 4), "
        f"method sao, seeds {', '.join(map(str, SEEDS))}, on the local backend, then on the "
        f"simulated backend with the cost model fitted to seed {FITTED_SEED}'s real run",
        "commands": [" ".join(sys.argv)],
        "provenance": provenance(),
        "machine_load": load,
        "load": load_in_words(load),
    }
    (HERE / "provenance.json").write_text(json.dumps(record, indent=1) + "\n")
    subprocess.run([sys.executable, str(HERE / "table.py")], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
