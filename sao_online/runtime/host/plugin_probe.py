"""A user's modules loaded first in a child process, under a deadline.

A method ``MODULE:FACTORY`` or an environment ``MODULE:namespace/Name-vN`` runs the user's code
as soon as it is imported and called. A factory that sleeps forever would hang the command
without a word; one that calls ``os._exit`` would end it with no message at all. So before a
command imports or calls them itself, :func:`check_plugins_load` does so in a child process
(from the preloaded worker server, so it starts in a fraction of a second) and waits at most
``PLUGIN_LOAD_SECONDS`` for each: a module that hangs, a child that dies without an answer, or an
error is one line naming the spec. Once a spec has loaded in a child, this process loads it as
before (the same code, known to load); each spec is checked once per process.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
from dataclasses import dataclass
from typing import Any

from sao_online.config import ConfigError

#: Seconds one plug-in (its import and, for a method, its factory call) may take to load.
PLUGIN_LOAD_SECONDS = 60.0
#: The environment variable that sets another deadline (seconds), e.g. for a slow file system.
DEADLINE_VARIABLE = "SAO_ONLINE_PLUGIN_SECONDS"

_loaded: set[tuple[str, str]] = set()  # (kind, spec) that loaded in a child of this process


@dataclass(frozen=True)
class PluginLoad:
    """One plug-in to load: a method (``kind="method"``, built from ``config``, a config
    mapping with that method) or an environment id (``kind="env"``; made from ``config`` when
    one is given)."""

    kind: str
    spec: str
    field: str
    config: dict[str, Any] | None = None

    def describe(self) -> str:
        what = "method" if self.kind == "method" else "environment"
        return f"{self.field}: {what} {self.spec!r}"


def _load(load: PluginLoad) -> None:
    if load.kind == "method":
        from sao_online.algorithms import build_method
        from sao_online.config import load_config

        build_method(load_config(load.config))
    elif load.config is not None:  # imported, made once, the schedule checked against it
        from sao_online.config import load_config
        from sao_online.config.run_schedule import resolve_schedule

        resolve_schedule(load_config(load.config))
    else:
        from sao_online.environments import check_env_id

        check_env_id(load.spec, field=load.field)


def _child(loads: list[PluginLoad], environment: dict[str, str], pipe: Any) -> None:
    """Load each plug-in, telling the parent when each starts and how it ended."""
    from sao_online.runtime.host.processes import adopt_environment, watch_parent

    watch_parent()
    adopt_environment(environment)
    for index, load in enumerate(loads):
        pipe.send(("start", index, ""))
        try:
            _load(load)
        except Exception as error:  # noqa: BLE001  (a user's module may raise anything)
            lines = str(error).strip().splitlines()
            text = lines[0][:300] if lines else type(error).__name__
            if not isinstance(error, ValueError):
                text = f"{type(error).__name__}: {text}"
            pipe.send(("error", index, text))
            return
        pipe.send(("done", index, ""))
    pipe.send(("end", -1, ""))


def _may_run_code(load: PluginLoad) -> bool:
    """False for a module that cannot be found at all: importing it runs no code, so the
    command's own import says so at once, without a child process."""
    module = load.spec.partition(":")[0] if load.kind == "method" else load.spec.rpartition(":")[0]
    if "." in module:
        return True  # finding it would import its parent package: user code
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def deadline_seconds() -> float:
    """The deadline per plug-in: ``$SAO_ONLINE_PLUGIN_SECONDS`` or ``PLUGIN_LOAD_SECONDS``."""
    text = os.environ.get(DEADLINE_VARIABLE, "")
    try:
        value = float(text)
    except ValueError:
        return PLUGIN_LOAD_SECONDS
    return value if 0 < value < 86400 else PLUGIN_LOAD_SECONDS


def check_plugins_load(loads: list[PluginLoad]) -> None:
    """Load ``loads`` in a child process, each within the deadline; nothing happens for a
    built-in or already-checked one.

    Raises:
        ConfigError: one line naming the spec: its error, the deadline it passed, or the exit
            status of the child that ended without an answer.
    """
    pending = [
        load for load in loads if (load.kind, load.spec) not in _loaded and _may_run_code(load)
    ]
    pending = list({(load.kind, load.spec): load for load in pending}.values())
    if not pending:
        return
    from sao_online.runtime.host.processes import process_context

    deadline = deadline_seconds()
    context = process_context()
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(pending, dict(os.environ), sender), name="sao-plugin-check"
    )
    process.start()
    sender.close()
    current: PluginLoad | None = None
    try:
        while True:
            if not receiver.poll(deadline):
                what = current.describe() if current else f"{pending[0].describe()} (starting)"
                alive = process.is_alive()
                if alive:
                    raise ConfigError(
                        f"{what}: loading it (the import and, for a method, the factory call) "
                        f"took more than {deadline:.0f} s; check the module for a wait or a loop "
                        f"at import (${DEADLINE_VARIABLE} sets another deadline)"
                    )
                raise _died(what, process)
            try:
                status, index, text = receiver.recv()
            except (EOFError, OSError):
                what = current.describe() if current else pending[0].describe()
                raise _died(what, process) from None
            if status == "start":
                current = pending[index]
            elif status == "done":
                _loaded.add((pending[index].kind, pending[index].spec))
                current = None
            elif status == "error":
                raise ConfigError(text)  # the loader's own line, which names the field
            else:
                return
    finally:
        if process.is_alive():
            process.kill()
        process.join(timeout=5)
        receiver.close()


def _died(what: str, process: Any) -> ConfigError:
    process.join(timeout=5)
    code = process.exitcode
    how = f"exited with code {code}" if code is not None and code >= 0 else "was killed"
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            how = f"was killed by {signal.Signals(-code).name}"
    return ConfigError(f"{what}: the process loading it {how} before it loaded")


def method_loads(config: dict[str, Any], specs: list[str], field: str) -> list[PluginLoad]:
    """The plug-in methods among ``specs``, each to be built from ``config`` (a config mapping)
    with ``algorithm.name`` set to it."""
    loads = []
    for spec in specs:
        if ":" not in spec:
            continue
        algorithm = {**(config.get("algorithm") or {}), "name": spec}
        loads.append(PluginLoad("method", spec, field, {**config, "algorithm": algorithm}))
    return loads


def env_loads(
    env_ids: list[str], field: str = "env.id", config: dict[str, Any] | None = None
) -> list[PluginLoad]:
    """The environment ids among ``env_ids`` that name a module to import; with ``config`` (a
    config mapping of that env) the environment is also made once and the schedule checked."""
    return [PluginLoad("env", env_id, field, config) for env_id in env_ids if ":" in env_id]
