"""Worker pools that sample episodes for the asynchronous runtime: the ``WorkerPool`` protocol
(``pool``), local processes (``local``), Ray actors (``ray_backend``), the body every rollout
worker runs (``rollout_worker``) and the policy weights published to it (``weights``). Nothing is
imported here, so Ray is loaded only by the pool that uses it."""
