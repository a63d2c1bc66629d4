"""The program every sandbox runs (``python3 -E -s -c <this source>``); standard library only.

It reads one JSON request from stdin: ``nonce``, ``files`` (name -> text, written to the
current folder; ``solution.py`` is the untrusted program), ``helpers`` (modules among the files
whose calls are counted), ``function`` and ``tests`` (a list of argument lists). It imports the
helpers and wraps their public functions (and their module ``__getattr__``, which answers the
names they lack) so that every call, or attempt at a missing name, is counted in this harness's
own tally, never in a name the program could set. It then loads the solution and calls the
function once per test, printing one record per event as ``<nonce> <json>`` on the stdout it
started with. The solution's own prints go nowhere. Records: ``start`` (before anything of the
program runs), ``syntax_error``, ``load_error``,
``missing_function``, ``memory_limit``, ``file_limit`` (detail), ``test`` (index, value or
error), ``done``; each carries ``helper_calls`` (the tally so far).
"""

import errno
import functools
import importlib
import json
import os
import signal
import struct
import sys
import types

PLAIN_TYPES = (bool, int, float, str, type(None))

#: The kernel's key management calls (add_key, request_key, keyctl) per audit architecture a
#: process of this machine can call in. Keys outlive the processes that made them and can be
#: shared across uids, so a program could leave one for a later run: the harness refuses them.
KEY_CALLS = {
    "x86_64": {
        0xC000003E: (248, 249, 250, 0x400000F8, 0x400000F9, 0x400000FA),  # and their x32 forms
        0x40000003: (286, 287, 288),  # i386, through int 0x80
    },
    "aarch64": {
        0xC00000B7: (217, 218, 219),
        0x40000028: (309, 310, 311),  # 32-bit arm
    },
}


def deny_kernel_keyrings():
    """Install a seccomp filter under which the key management calls fail with ENOSYS, for
    this process and every one it starts; False where it cannot (another machine, no ctypes,
    no seccomp)."""
    calls = KEY_CALLS.get(os.uname().machine)
    if calls is None:
        return False
    try:
        import ctypes
    except ImportError:
        return False
    load_arch, load_call = (0x20, 0, 0, 4), (0x20, 0, 0, 0)  # BPF_LD|BPF_W|BPF_ABS
    allow, deny = (0x06, 0, 0, 0x7FFF0000), (0x06, 0, 0, 0x00050000 | errno.ENOSYS)
    program = [load_arch]
    for arch, numbers in calls.items():
        # if arch matches: load the call number, deny each listed one, else allow
        block = [load_call]
        for index, number in enumerate(numbers):
            block.append((0x15, len(numbers) - index, 0, number))  # BPF_JEQ: to `deny` below
        block += [allow, deny]
        program.append((0x15, 0, len(block), arch))  # arch differs: skip the block
        program += block
    program.append(allow)
    code = b"".join(struct.pack("HBBI", *instruction) for instruction in program)
    buffer = ctypes.create_string_buffer(code)

    class Program(ctypes.Structure):
        _fields_ = [("length", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    filter_program = Program(len(program), ctypes.addressof(buffer))
    no_new_privileges, set_seccomp, filter_mode = 38, 22, 2
    if libc.prctl(no_new_privileges, 1, 0, 0, 0) != 0:
        return False
    return libc.prctl(set_seccomp, filter_mode, ctypes.byref(filter_program), 0, 0) == 0


def describe(error):
    """(kind, text) for an exception raised by the solution."""
    if isinstance(error, MemoryError):
        return "memory_limit", "memory limit: MemoryError"
    if isinstance(error, OSError) and error.errno == errno.EFBIG:
        return "file_limit", "file size limit: " + str(error)[:120]
    text = type(error).__name__ + ": " + str(error)
    return "exception", text[:240]


def encode(value, depth=0):
    """The JSON form of a plain return value, or raise TypeError naming what it is."""
    if type(value) in PLAIN_TYPES:
        if type(value) is float and value != value:
            raise TypeError("returned NaN")
        return value
    if type(value) in (list, tuple) and depth < 3 and len(value) <= 1000:
        return [encode(item, depth + 1) for item in value]
    raise TypeError("returned a " + type(value).__name__ + ", not a plain value")


def watch(module, tally):
    """Count every call of ``module``'s public functions, and every public name asked of it
    that it lacks, in ``tally`` (name -> count)."""

    def count(name):
        tally[name] = tally.get(name, 0) + 1

    def counted(name, function):
        @functools.wraps(function)
        def call(*args, **kwargs):
            count(name)
            return function(*args, **kwargs)

        return call

    namespace = vars(module)
    for name, value in list(namespace.items()):
        if not name.startswith("_") and isinstance(value, types.FunctionType):
            namespace[name] = counted(name, value)
    answer_missing = namespace.get("__getattr__")

    def missing(name):
        if not name.startswith("_"):
            count(name)
        if answer_missing is not None:
            return answer_missing(name)
        raise AttributeError("module " + module.__name__ + " has no attribute " + name)

    namespace["__getattr__"] = missing


def main():
    deny_kernel_keyrings()
    # An interpreter inherits an ignored SIGINT from whatever started it (a background job's
    # does); the program meets it as a fresh interactive start has it, on every backend.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    request = json.loads(sys.stdin.buffer.read().decode())
    nonce = request["nonce"]
    results = os.fdopen(os.dup(1), "w")
    sink = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(sink, target)

    tally = {}

    def emit(record):
        record["helper_calls"] = dict(tally)
        try:
            results.write(nonce + " " + json.dumps(record) + "\n")
            results.flush()
        except (OSError, ValueError):
            pass  # the solution closed or filled our stdout: the host reports no result

    # Before anything of the program runs: a run with no record at all never got this far (the
    # backend could not set it up), whatever exit code the program later chose.
    emit({"event": "start"})
    for name, text in request["files"].items():
        with open(name, "w") as handle:
            handle.write(text)
    sys.path.insert(0, os.getcwd())
    for name in request.get("helpers", []):
        try:
            watch(importlib.import_module(name), tally)
        except Exception as error:  # noqa: BLE001  (a broken helper is the caller's fault)
            emit({"event": "load_error", "detail": "helper " + name + ": " + describe(error)[1]})
            return
    with open("solution.py") as handle:
        source = handle.read()
    try:
        code = compile(source, "solution.py", "exec")
    except (SyntaxError, ValueError) as error:
        line = getattr(error, "lineno", None)
        where = "line " + str(line) + ": " if line else ""
        emit(
            {
                "event": "syntax_error",
                "detail": "syntax error: " + where + str(getattr(error, "msg", error))[:200],
            }
        )
        return
    module = types.ModuleType("solution")
    module.__file__ = os.path.abspath("solution.py")
    sys.modules["solution"] = module
    try:
        exec(code, module.__dict__)
    except BaseException as error:  # noqa: BLE001  (SystemExit and all: the solution's fault)
        kind, text = describe(error)
        event = kind if kind != "exception" else "load_error"
        emit({"event": event, "detail": "while loading: " + text})
        return
    function = module.__dict__.get(request["function"])
    if not callable(function):
        emit(
            {
                "event": "missing_function",
                "detail": "no function named " + request["function"] + " is defined",
            }
        )
        return
    for index, args in enumerate(request["tests"]):
        try:
            value = encode(function(*args))
        except BaseException as error:  # noqa: BLE001
            emit({"event": "test", "index": index, "error": describe(error)[1]})
            continue
        emit({"event": "test", "index": index, "value": value})
    emit({"event": "done"})


if __name__ == "__main__":
    main()
