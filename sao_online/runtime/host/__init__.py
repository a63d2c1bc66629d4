"""The machine's side of a run: fresh processes from a preloaded forkserver (``processes``), torch
threads per process (``threads``), settings the machine cannot run and the worker server's start
(``machine_fit``), and the missing ``__main__`` guard said clearly (``main_guard``). Nothing is
imported here: the command line imports ``machine_fit`` before torch."""
