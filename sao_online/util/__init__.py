"""Small utilities every layer may use: reading YAML safely, suggesting names, quieting other
libraries, the cache folder, the code's identity, durations and sizes as words.

Nothing here imports another module of the package outside this folder, and nothing is
imported here, so each utility costs only its own imports.
"""
