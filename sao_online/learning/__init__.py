"""The learning core: the math as pure tensor functions, the learner's step, the warm start.

- ``advantages``, ``losses``, ``regularizers``: advantage estimators, policy and value losses,
  KL and entropy terms, each taking tensors and returning tensors (plus a small stats dict);
- ``types`` (a trajectory), ``batching`` (trajectories collated for the learner),
  ``prefix_sharing`` (a group's shared prompt run once);
- ``learner``: one learner step (critic updates, one policy update);
- ``warm_start``: the supervised start on demonstrations every run begins from.

The math and types are the package's second layer (they import only the utilities); the
learner and the warm start stand on the models and the config. Nothing is imported here, so
importing one of them costs only its own imports. ``sao_online.advantages`` and
``sao_online.losses`` import the math's public names from where the documentation names them.
"""
