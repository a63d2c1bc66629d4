#!/usr/bin/env bash
# The async tier's kept results, from a clean committed tree (run from anywhere in the checkout):
#   benchmarks/async/seeds-0-2, seeds-3-5   each seed set's sweep of the staleness bound
#   benchmarks/async/seeds-0-5              both pooled (with which conclusions each set reaches)
# Every method the tier compares: frozen (always added), sao, sao_running_mean, grpo_dis, grpo
# and the off-policy corrections paired with SAO's and GRPO's estimators (token TIS, sequence-
# masked IS, decoupled PPO, none), at runtime.max_staleness 0, 2, 4 and 8 (4 is the tier's own:
# that value's folder is the async tier's result), from the kept lite warm starts (the async tier
# shares them). The runs go to $WORK (default runs/async-benchmark, which git ignores); a stopped
# script continues where it stopped when run again (--resume).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "produce.sh: the tree differs from its commit; kept results come from a committed tree" >&2
  exit 2
fi
BIN=${BIN:-.venv/bin}
WORK=${WORK:-runs/async-benchmark}
METHODS=sao,sao_running_mean,grpo_dis,grpo
METHODS=$METHODS,sao_tis,sao_mis,sao_decoupled,sao_nocorr,grpo_tis,grpo_mis,grpo_decoupled,grpo_nocorr
for first in 0 3; do
  seeds="$first-$((first + 2))"
  "$BIN/sao-online" benchmark --tier async --methods "$METHODS" --seeds 3 --first-seed "$first" \
    --sweep runtime.max_staleness=0,2,4,8 --warm-starts benchmarks/warm-starts/lite \
    --out "$WORK/seeds-$seeds" --resume
done
rm -rf benchmarks/async/seeds-0-2 benchmarks/async/seeds-3-5 benchmarks/async/seeds-0-5
for seeds in 0-2 3-5; do  # the results without the run directories
  "$BIN/sao-online" benchmark merge "$WORK/seeds-$seeds" --out "benchmarks/async/seeds-$seeds"
done
"$BIN/sao-online" benchmark merge benchmarks/async/seeds-0-2 benchmarks/async/seeds-3-5 \
  --out benchmarks/async/seeds-0-5
