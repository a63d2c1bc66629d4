"""The built-in methods' names and how many rollouts each takes per prompt, without torch.

Loading a config checks ``algorithm.name`` against these names; that must not import torch (it
takes seconds, and the ``sao-online run`` command line starts its worker server only once the
config is checked). ``sao_online.algorithms.registry`` builds its table of factories from this
one, so each name is spelled here alone, in the order the help and error messages list them.
"""

from __future__ import annotations

#: Built-in method name -> True when it takes one rollout per prompt (``compare`` and the
#: benchmark leave such a method's ``algorithm.group_size`` unset), False for the group methods.
BUILTIN_METHODS: dict[str, bool] = {
    "sao": True,
    "sao_running_mean": True,
    "sao_prompt_mean": True,
    "sao_lambda1": True,
    "sao_no_skip_obs": True,
    "sao_tis": True,
    "sao_mis": True,
    "sao_decoupled": True,
    "sao_nocorr": True,
    "grpo": False,
    "grpo_dis": False,
    "grpo_tis": False,
    "grpo_mis": False,
    "grpo_decoupled": False,
    "grpo_nocorr": False,
    "dr_grpo": False,
    "dapo": False,
    "gspo": False,
    "rloo": False,
    "frozen": True,
}

#: The built-in methods' names, in order.
METHOD_NAMES: tuple[str, ...] = tuple(BUILTIN_METHODS)

#: Methods with one rollout per prompt.
SINGLE_ROLLOUT_METHODS: frozenset[str] = frozenset(
    name for name, single in BUILTIN_METHODS.items() if single
)
