"""Settings a model needs beyond the defaults, filled in where a config leaves them unset.

The config's defaults follow the paper (SAO, arXiv 2607.07508): no KL term, no entropy term.
The embedded tiny model (a ~1M-parameter byte-level Llama) does not re-adapt with them: on the
task ``sao-online init task`` writes, neither SAO nor GRPO got back to half the oracle's reward
after the shift in any of 3 seeds; they kept the old answer or collapsed into text that names no
answer at all. A KL pull to the warm start keeps the other answers alive: at 0.3 (the demo's
setting) SAO re-adapted in 3 of 3 seeds and GRPO in 1 of 3; at 0.6 both did in 3 of 3
(``docs/tiny_model_preset.md``, with the data). So the tiny model's preset sets
``regularizers.kl_coef: 0.6``.

A preset only fills in fields the config (or ``--set``) leaves out: a config that sets
``regularizers.kl_coef`` (0 included, the paper's setting) gets exactly what it says. It applies
where a config is loaded from YAML or a dict (``load_config``, the command line, the API); an
``ExperimentConfig`` object built in code has every field set and keeps the paper's defaults.
The run's ``config.yaml`` records the value used.
"""

from __future__ import annotations

import copy
from typing import Any

#: Model name -> dotted field -> value, applied where the config leaves the field unset.
MODEL_PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"regularizers.kl_coef": 0.6},
}
#: The model a config without ``model.name`` gets (the config's default).
DEFAULT_MODEL = "tiny"


def preset_for(data: dict[str, Any]) -> dict[str, Any]:
    """The preset of the model a config dict names (``{}`` for a model without one)."""
    model = data.get("model")
    name = model.get("name", DEFAULT_MODEL) if isinstance(model, dict) else DEFAULT_MODEL
    return MODEL_PRESETS.get(name, {}) if isinstance(name, str) else {}


def apply_model_preset(data: dict[str, Any]) -> dict[str, Any]:
    """A copy of the config dict ``data`` with its model's preset where ``data`` sets nothing.

    A section that is not a mapping is left alone (loading then names the error).

    Example:
        >>> apply_model_preset({})["regularizers"]["kl_coef"]
        0.6
        >>> apply_model_preset({"regularizers": {"kl_coef": 0.0}})["regularizers"]["kl_coef"]
        0.0
        >>> apply_model_preset({"model": {"name": "smollm2-135m"}})
        {'model': {'name': 'smollm2-135m'}}
    """
    preset = preset_for(data)
    if not preset:
        return data
    data = copy.deepcopy(data)
    for dotted, value in preset.items():
        *sections, name = dotted.split(".")
        node: Any = data
        for section in sections:
            if node.get(section) is None:
                node[section] = {}
            node = node[section]
            if not isinstance(node, dict):
                break
        else:
            node.setdefault(name, value)
    return data
