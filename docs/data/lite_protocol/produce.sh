#!/usr/bin/env bash
# The lite tier re-run under the benchmark protocol, family by family, from a committed tree.
# Each family (task) of the tier runs on its own, so the re-run can be spread over sessions and
# machines and a stopped call loses at most one family's step:
#   1. for every family to run: the core suite's lite tier with tier.yaml merged in, narrowed to
#      that family (3 warm starts, controls, its tuning grid), in WORK/FAMILY/suite.yaml, and its
#      evaluation's plan (controls included) checked with --dry-run, all before any run, so a
#      tier the protocol cannot run is refused in seconds rather than after hours of tuning;
#   2. per family, `benchmark tune`: every method on the family's grid on the tuning seeds
#      100-101, which the evaluation seeds 0-5 avoid; the tuned suite in WORK/FAMILY/tune;
#   3. per family, the tuned suite on two seed sets (0-2 and 3-5), with a re-adaptation control
#      per run and shift, run seed s from warm start s mod 3;
#   4. per family, kept in KEEP/families/FAMILY/: each set, both pooled, and the tune's record
#      (tune/: plan, values, report, tuned suite, each point's results; merge drops run folders);
#   5. once every family of the tier is kept there (by this call or earlier ones), the families
#      pooled per seed set (`merge --task-from`) into KEEP/seeds-0-2 and KEEP/seeds-3-5, and both
#      into KEEP/seeds-0-5;
#   6. the README's and docs' lite tables pointed at those folders and regenerated.
# A family already kept in KEEP/families is not run again (remove its folder to run it again);
# each step of a family resumes what an earlier, stopped call left in WORK (--resume). The prose
# around the tables, the superseded folders' index and the tests on the old verdicts are left to
# a person (the script prints what to review).
#
# Usage: docs/data/lite_protocol/produce.sh WORK
#   TASKS=...    the families to run (comma-separated; default every family of the tier)
#   SIZE=smoke   the same pipeline on the smoke tier, kept in WORK/kept and the tables written
#                to copies of the pages in WORK/pages (nothing in the checkout changes)
#   SEEDS=N      seeds per set (default 3: sets 0..N-1 and N..2N-1)
#   METHODS=...  the methods (default sao,sao_running_mean,grpo_dis,grpo; frozen is added)
#   TUNE_SEEDS=N tuning seeds (default: tier.yaml's 2)
#   KEEP=...     where the results are kept (default benchmarks/lite-protocol)
#   PYTHON=...   the interpreter with sao-online installed (default .venv/bin/python)
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
if [ -n "${KEEP:-}" ]; then keep=$KEEP; elif [ "$size" = lite ]; then keep=benchmarks/lite-protocol
else keep=$work/kept; fi
a="seeds-0-$((seeds - 1))" b="seeds-$seeds-$((2 * seeds - 1))" both="seeds-0-$((2 * seeds - 1))"
read -r -a tier_families <<<"$("$python" -c '
import sys
from sao_online.benchmark.suite import plan_tier
print(" ".join(task.name for task in plan_tier("core", sys.argv[1]).tasks))' "$size")"
if [ -n "${TASKS:-}" ]; then IFS=, read -r -a asked <<<"$TASKS"; else asked=("${tier_families[@]}"); fi
kept() { [ -f "$keep/families/$1/$both/results/benchmark.json" ] && [ -f "$keep/families/$1/tune/suite.yaml" ]; }
families=()
for family in "${asked[@]}"; do
  if kept "$family"; then echo "produce.sh: $family is kept in $keep/families/$family; not run again"
  else families+=("$family"); fi
done

# 1. Each family's part of the tier under the protocol, and its evaluation's plan.
for family in "${families[@]}"; do
  mkdir -p "$work/$family"
  "$python" - "$size" "$here/tier.yaml" "$work/$family/suite.yaml" "$family" <<'PY'
import sys
from pathlib import Path

import yaml

from sao_online.benchmark.suite import plan_tier
from sao_online.benchmark.tune import write_suite

tier, edit, target, family = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
write_suite(plan_tier("core", tier), target, yaml.safe_load(edit.read_text())[tier], only=[family])
PY
  sao benchmark --suite "$work/$family/suite.yaml" --tier "$size" --methods "$methods" \
    --seeds "$seeds" --out "$work/$family/plan-check" --dry-run
done

tune_seeds=()
if [ -n "${TUNE_SEEDS:-}" ]; then tune_seeds=(--seeds "$TUNE_SEEDS"); fi
for family in "${families[@]}"; do
  # 2. Tuning, on seeds the evaluation does not use. Run from WORK, so the tuned suite records
  # its folder as FAMILY/tune: where it is kept below, relative to KEEP/families.
  (cd "$work" && sao benchmark tune --suite "$family/suite.yaml" --tier "$size" \
    --methods "$methods" "${tune_seeds[@]}" --eval-seeds "0-$((2 * seeds - 1))" \
    --out "$family/tune" --resume)

  # 3. Two seed sets of the tuned suite, with controls (the tier declares them).
  for first in 0 "$seeds"; do
    sao benchmark --suite "$work/$family/tune/suite.yaml" --tier "$size" --methods "$methods" \
      --seeds "$seeds" --first-seed "$first" --out "$work/$family/run-$first" --resume
  done

  # 4. Kept: each set, both pooled, and the tune's record without its run folders.
  mine=$keep/families/$family
  rm -rf "${mine:?}/$a" "$mine/$b" "$mine/$both" "$mine/tune"
  sao benchmark merge "$work/$family/run-0" --out "$mine/$a"
  sao benchmark merge "$work/$family/run-$seeds" --out "$mine/$b"
  sao benchmark merge "$mine/$a" "$mine/$b" --out "$mine/$both"
  "$python" -c 'import shutil, sys; shutil.copytree(sys.argv[1], sys.argv[2], ignore=shutil.ignore_patterns("runs"))' \
    "$work/$family/tune" "$mine/tune"
  echo "produce.sh: $family kept in $mine ($a, $b, $both, tune)"
done

# 5. Every family pooled per seed set, once each is kept.
missing=()
for family in "${tier_families[@]}"; do kept "$family" || missing+=("$family"); done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "produce.sh: not yet run under the protocol: ${missing[*]}; the tier is pooled and its tables regenerated once every family is kept in $keep/families"
  exit 0
fi
first_family=${tier_families[0]}
for set in "$a" "$b"; do
  taken=()
  for family in "${tier_families[@]:1}"; do taken+=(--task-from "$family=$keep/families/$family/$set"); done
  rm -rf "${keep:?}/$set"
  sao benchmark merge "$keep/families/$first_family/$set" "${taken[@]}" --out "$keep/$set"
done
rm -rf "${keep:?}/$both"
sao benchmark merge "$keep/$a" "$keep/$b" --out "$keep/$both"

# 6. The lite tables, from the pooled folders.
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

echo "produce.sh: kept in $keep ($a, $b, $both, families/); tables regenerated in ${pages[*]}"
if [ "$size" = lite ]; then
  echo "next: review git diff; update the prose around the tables and tests/docs/test_lite_results_doc.py"
  echo "      to what the new results say, index benchmarks/lite/ as superseded, and commit"
fi
