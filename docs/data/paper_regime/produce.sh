#!/usr/bin/env bash
# The runs behind docs/paper_regime.md: configs/paper_regime_quarter.yaml for sao,
# sao_running_mean, grpo_dis and grpo on two disjoint seed sets (0-2 and 3-5), two runs at a
# time, each folder with the provenance of the code that ran it (refused from a dirty tree).
# Simulated runs do not depend on the machine's load, so the machine may be busy.
#
# Usage: docs/data/paper_regime/produce.sh OUT [FIRST_SEED ...]
#   (then collect.py and table.py, as printed). FIRST_SEED picks the seed sets: 0 (set-1, seeds
#   0-2) and 3 (set-2, seeds 3-5), both unless named.
set -euo pipefail
out=${1:?usage: produce.sh OUT [FIRST_SEED ...]}
shift
[ $# -gt 0 ] || set -- 0 3
firsts=("$@")
bin=$(dirname "$(command -v python)")
python - "$out" "${firsts[@]}" <<'PY'
import json, sys
from pathlib import Path
from sao_online.benchmark.provenance import provenance
record = provenance()
if record["dirty"]:
    sys.exit("produce.sh: the tree has uncommitted changes; commit them first")
out = Path(sys.argv[1])
for first in sys.argv[2:]:
    (out / f"seeds-{first}").mkdir(parents=True, exist_ok=True)
    (out / f"seeds-{first}" / "source.json").write_text(json.dumps(record, indent=1) + "\n")
PY
for first in "${firsts[@]}"; do
  "$bin/sao-online" compare configs/paper_regime_quarter.yaml \
    --methods sao,sao_running_mean,grpo_dis,grpo --seeds 3 --first-seed "$first" \
    --parallel 2 --out "$out/seeds-$first"
done
sets=()
for first in "${firsts[@]}"; do sets+=("set-$((first / 3 + 1))=$out/seeds-$first"); done
echo "python docs/data/paper_regime/collect.py ${sets[*]}"
echo "python docs/data/paper_regime/table.py"
