#!/usr/bin/env bash
# The lite tier re-run under the benchmark protocol, end to end, from a committed tree:
#   1. the core suite's lite tier with tier.yaml merged in (3 warm starts per family, controls,
#      the tuning grid), written to WORK/suite.yaml;
#   2. `benchmark tune`: every method on its task's grid on the tuning seeds 100-101, which the
#      evaluation seeds 0-5 avoid; the tuned suite in WORK/tune/suite.yaml;
#   3. the tuned suite on two seed sets (0-2 and 3-5), with a re-adaptation control per run and
#      shift, run seed s from warm start s mod 3;
#   4. each set and both pooled kept in benchmarks/lite-protocol/ (merge drops the run folders),
#      with the tune's record (tune/: plan, values, report, tuned suite, each point's results);
#   5. the README's and docs' lite tables pointed at the new folders and regenerated.
# Each step resumes what an earlier, stopped call of the script left in WORK (--resume). The
# prose around the tables, the superseded folders' index and the tests on the old verdicts are
# left to a person (the script prints what to review).
#
# Usage: docs/data/lite_protocol/produce.sh WORK
#   SIZE=smoke   the same pipeline on the smoke tier, kept in WORK/kept and the tables written
#                to copies of the pages in WORK/pages (nothing in the checkout changes)
#   SEEDS=N      seeds per set (default 3: sets 0..N-1 and N..2N-1)
#   METHODS=...  the methods (default sao,sao_running_mean,grpo_dis,grpo; frozen is added)
#   TUNE_SEEDS=N tuning seeds (default: tier.yaml's 2)
#   TASKS=...    only these tasks of the tier (comma-separated): a pilot of the protocol on some
#                families, kept in KEEP (required then) and no table regenerated, since the
#                lite tables cover every family
#   KEEP=...     where the results are kept (default benchmarks/lite-protocol)
#   PYTHON=...   the interpreter with sao-online installed (default .venv/bin/python)
# Before any run, step 1 also plans the evaluation (its controls included) with --dry-run, so a
# tier the protocol cannot run is refused in seconds rather than after the tuning.
set -euo pipefail
work=${1:?usage: produce.sh WORK}
size=${SIZE:-lite}
seeds=${SEEDS:-3}
methods=${METHODS:-sao,sao_running_mean,grpo_dis,grpo}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
cd "$root"
python=${PYTHON:-$root/.venv/bin/python}
sao() { "$(dirname "$python")/sao-online" "$@"; }

if [ "$size" = lite ] && [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "produce.sh: the tree has uncommitted changes; commit them first" >&2
  exit 1
fi
mkdir -p "$work"
work=$(cd "$work" && pwd)
tasks=${TASKS:-}
if [ -n "$tasks" ] && [ -z "${KEEP:-}" ]; then
  echo "produce.sh: TASKS=$tasks needs KEEP=FOLDER: a pilot is kept apart from the tier's results" >&2
  exit 1
fi
if [ -n "${KEEP:-}" ]; then keep=$KEEP; elif [ "$size" = lite ]; then keep=benchmarks/lite-protocol
else keep=$work/kept; fi
a="seeds-0-$((seeds - 1))" b="seeds-$seeds-$((2 * seeds - 1))" both="seeds-0-$((2 * seeds - 1))"

# 1. The tier under the protocol (only TASKS, if given).
"$python" - "$size" "$here/tier.yaml" "$work/suite.yaml" "$tasks" <<'PY'
import sys
from pathlib import Path

import yaml

from sao_online.benchmark.suite import plan_tier
from sao_online.benchmark.tune import write_suite

tier, edit, target, tasks = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
only = tasks.split(",") if tasks else None
write_suite(plan_tier("core", tier), target, yaml.safe_load(edit.read_text())[tier], only=only)
PY

# ... and the evaluation's plan, controls included, checked before anything runs.
sao benchmark --suite "$work/suite.yaml" --tier "$size" --methods "$methods" \
  --seeds "$seeds" --out "$work/plan-check" --dry-run

# 2. Tuning, on seeds the evaluation does not use.
tune_seeds=()
if [ -n "${TUNE_SEEDS:-}" ]; then tune_seeds=(--seeds "$TUNE_SEEDS"); fi
# Run from WORK, so the tuned suite records its folder as `tune`: the name the kept copy has
# beside the seed sets, which their scorecards then name.
(cd "$work" && sao benchmark tune --suite suite.yaml --tier "$size" --methods "$methods" \
  "${tune_seeds[@]}" --eval-seeds "0-$((2 * seeds - 1))" --out tune --resume)

# 3. Two seed sets of the tuned suite, with controls (the tier declares them).
for first in 0 "$seeds"; do
  sao benchmark --suite "$work/tune/suite.yaml" --tier "$size" --methods "$methods" \
    --seeds "$seeds" --first-seed "$first" --out "$work/run-$first" --resume
done

# 4. Kept: each set, both pooled, and the tune's record without its run folders.
rm -rf "${keep:?}/$a" "$keep/$b" "$keep/$both" "$keep/tune"
sao benchmark merge "$work/run-0" --out "$keep/$a"
sao benchmark merge "$work/run-$seeds" --out "$keep/$b"
sao benchmark merge "$keep/$a" "$keep/$b" --out "$keep/$both"
"$python" -c 'import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], ignore=shutil.ignore_patterns("runs"))' \
  "$work/tune" "$keep/tune"

if [ -n "$tasks" ]; then
  echo "produce.sh: the pilot on $tasks kept in $keep ($a, $b, $both, tune); no table regenerated"
  exit 0
fi

# 5. The lite tables, from the new folders.
pages=(README.md docs/benchmark.md docs/critic_vs_running_mean.md)
if [ "$size" = lite ]; then
  target=benchmarks/lite-protocol/ prefix='benchmarks/lite/'
else  # copies of the pages, whose blocks name the checkout's folders and the kept smoke ones
  for page in "${pages[@]}"; do mkdir -p "$work/pages/$(dirname "$page")"; cp "$page" "$work/pages/$page"; done
  cd "$work/pages"
  sed -i -e "/benchmark-table:/s#\(\.\./\)*benchmarks/#$root/benchmarks/#g" "${pages[@]}"
  target=$keep/ prefix="$root/benchmarks/lite/"
fi
renamed="s#${prefix}seeds-0-2#${target}$a#g;s#${prefix}seeds-3-5#${target}$b#g"
renamed="$renamed;s#${prefix}seeds-0-5#${target}$both#g"
sed -i -e "/benchmark-table:/{$renamed}" "${pages[@]}"
sao benchmark tables "${pages[@]}"

echo "produce.sh: kept in $keep ($a, $b, $both, tune); tables regenerated in ${pages[*]}"
if [ "$size" = lite ]; then
  echo "next: review git diff; update the prose around the tables and tests/docs/test_lite_results_doc.py"
  echo "      to what the new results say, index benchmarks/lite/ as superseded, and commit"
fi
