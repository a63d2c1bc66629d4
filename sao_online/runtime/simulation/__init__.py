"""The simulated runtime: the asynchronous runtime's roles in one process on a virtual clock.

- ``costs``: the cost model (``runtime.sim``) and its presets;
- ``clock``: the run's seconds, the machine's or virtual;
- ``weights``: policy versions and the virtual moment each became readable;
- ``env_calls``: environment calls answered on a worker's virtual clock;
- ``worker``: one rollout worker (a real engine) stepped on the clock;
- ``pool``: the discrete-event loop over the workers (a ``WorkerPool``);
- ``runtime``: ``run_simulated``, ``AsyncRuntime`` over that pool;
- ``fit``: a cost model fitted to the timings of real runs.

Nothing is imported here: ``loop`` imports ``clock`` alone.
"""
