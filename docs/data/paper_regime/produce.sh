#!/usr/bin/env bash
# The runs behind docs/paper_regime.md, each folder with the provenance of the code that ran it
# (refused from a dirty tree), two runs at a time. Simulated runs do not depend on the
# machine's load, so the machine may be busy.
#
# Usage: docs/data/paper_regime/produce.sh OUT [SET ...]
#   SET 0: configs/paper_regime_quarter.yaml for sao, sao_running_mean, grpo_dis and grpo on
#          seeds 0-2 (set-1), in OUT/seeds-0;
#   SET 3: the same on seeds 3-5 (set-2), in OUT/seeds-3;
#   full:  configs/paper_regime.yaml for sao and sao_running_mean on seed 0, in OUT/full
#          (about an hour per run on two cores).
#   Without SET: 0 and 3. Then collect.py and table.py, as printed.
set -euo pipefail
out=${1:?usage: produce.sh OUT [SET ...]}
shift
[ $# -gt 0 ] || set -- 0 3
for set in "$@"; do
  case $set in
    0 | 3 | full) ;;
    *) echo "produce.sh: unknown set '$set' (0, 3 or full)" >&2; exit 2 ;;
  esac
done
bin=$(dirname "$(command -v python)")
folder() { if [ "$1" = full ]; then echo "$out/full"; else echo "$out/seeds-$1"; fi; }
python - "$out" "$@" <<'PY'
import json, sys
from pathlib import Path
from sao_online.rundir.provenance import provenance
record = provenance()
if record["dirty"]:
    sys.exit("produce.sh: the tree has uncommitted changes; commit them first")
out = Path(sys.argv[1])
for name in sys.argv[2:]:
    folder = out / ("full" if name == "full" else f"seeds-{name}")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "source.json").write_text(json.dumps(record, indent=1) + "\n")
PY
sets=()
for set in "$@"; do
  if [ "$set" = full ]; then
    "$bin/sao-online" compare configs/paper_regime.yaml --methods sao,sao_running_mean \
      --seeds 1 --first-seed 0 --parallel 2 --out "$(folder full)"
    sets+=("full=$(folder full)")
  else
    "$bin/sao-online" compare configs/paper_regime_quarter.yaml \
      --methods sao,sao_running_mean,grpo_dis,grpo --seeds 3 --first-seed "$set" \
      --parallel 2 --out "$(folder "$set")"
    sets+=("set-$((set / 3 + 1))=$(folder "$set")")
  fi
done
echo "python docs/data/paper_regime/collect.py ${sets[*]}"
echo "python docs/data/paper_regime/table.py"
