"""A run's directory: where it is, what it holds, and the one process that writes it.

- :mod:`~sao_online.rundir.layout`: the layout (``run_directory``, the table names), reading
  ``config.yaml`` and table parts, atomic text files;
- :mod:`~sao_online.rundir.runlog`: :class:`~sao_online.rundir.runlog.RunLog`, which writes the
  tables in atomic parts, saves checkpoints and resumes from the newest one that verifies;
- :mod:`~sao_online.rundir.checkpoints`: checkpoint files (safetensors + JSON, never a pickle);
- :mod:`~sao_online.rundir.lock`: one writer per run directory;
- :mod:`~sao_online.rundir.repair`: advice for a damaged table part, true for the run's files;
- :mod:`~sao_online.rundir.disk_full`: a full disk said in one line naming the file;
- :mod:`~sao_online.rundir.tracking`: TensorBoard, Weights & Biases and episode transcripts.
- :mod:`~sao_online.rundir.episode_rows`: the rows of ``episodes.parquet`` (the column layout of
  a run's episodes, played or dropped).

Nothing is imported here, so ``import sao_online.rundir.disk_full`` stays free of torch.
"""
