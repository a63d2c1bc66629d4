#!/usr/bin/env bash
# The runs behind docs/paper_regime.md: configs/paper_regime_quarter.yaml for sao,
# sao_running_mean, grpo_dis and grpo on two disjoint seed sets (0-2 and 3-5), two runs at a
# time, each folder with the provenance of the code that ran it (refused from a dirty tree).
# Simulated runs do not depend on the machine's load, so the machine may be busy.
#
# Usage: docs/data/paper_regime/produce.sh OUT      (then collect.py and table.py, as printed)
set -euo pipefail
out=${1:?usage: produce.sh OUT}
bin=$(dirname "$(command -v python)")
python - "$out" <<'PY'
import json, sys
from pathlib import Path
from sao_online.rundir.provenance import provenance
record = provenance()
if record["dirty"]:
    sys.exit("produce.sh: the tree has uncommitted changes; commit them first")
out = Path(sys.argv[1])
for first in (0, 3):
    (out / f"seeds-{first}").mkdir(parents=True, exist_ok=True)
    (out / f"seeds-{first}" / "source.json").write_text(json.dumps(record, indent=1) + "\n")
PY
for first in 0 3; do
  "$bin/sao-online" compare configs/paper_regime_quarter.yaml \
    --methods sao,sao_running_mean,grpo_dis,grpo --seeds 3 --first-seed "$first" \
    --parallel 2 --out "$out/seeds-$first"
done
echo "python docs/data/paper_regime/collect.py set-1=$out/seeds-0 set-2=$out/seeds-3"
echo "python docs/data/paper_regime/table.py"
