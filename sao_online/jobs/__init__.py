"""Jobs: many runs at once, as ``compare`` and the benchmark both start them.

``pool`` runs jobs in child processes and says which failed, ``scheduler`` decides which job
takes the machine's cores next, ``methods`` names each method's folder and the overrides that
make its runs. This layer stands on the runtime and is below the commands and the benchmark:
nothing here imports them. Nothing is imported here.
"""
