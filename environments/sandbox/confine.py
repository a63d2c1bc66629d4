"""Confines the ``subprocess`` sandbox's Python before the harness runs; standard library only.

It runs in the sandbox's interpreter (``python3 -E -s -c <this source> CONFIG ...``, CONFIG a
JSON object) and does with system calls what ``unshare`` and a shell script of ``mount``
commands would do with about fifteen processes. Two modes (CONFIG's ``mode``):

``run`` (the harness's source follows this one's; CONFIG: ``disk_bytes``, ``uid``, ``links``,
``folders``; the run's rlimits already set): one run, one interpreter.

1. ``unshare``: new mount, network, PID, IPC and UTS namespaces (and a user namespace mapping
   the caller to root in it when ``uid`` is null: not run as root). Mounts are made private
   first, so nothing mounted here reaches the host.
2. ``fork``: the child is the PID namespace's first process. It builds the run's root on a
   size-limited tmpfs mounted over the host folder it starts in: ``/usr`` bound read-only (no
   set-user-ID programs), ``/bin``, ``/lib``... as in the host (links into ``/usr`` or
   read-only binds), its own ``/proc``, ``/dev/null``, ``zero``, ``random`` and ``urandom``,
   world-writable ``/tmp`` and ``/dev/shm``, and ``/work`` owned by ``uid``. It moves in with
   ``pivot_root`` and detaches the host's tree.
3. ``fork`` again: the grandchild drops to ``uid`` (no groups, no capabilities, an empty
   bounding set, no new privileges on exec), moves to ``/work`` and returns, so the harness runs
   there. The first process only waits for it and exits with its status (``128 + N`` for signal
   N, as a shell reports it): the first process of a PID namespace ignores signals it has no
   handler for (SIGXCPU among them), so it must not be the one that runs the program, and when
   it exits the kernel kills whatever the program left in the namespace. The outer process
   waits for it the same way.

``serve`` (as root; the harness's source is the next argument; CONFIG: ``control_fd``,
``links``, ``folders``): the fork server of ``fork_server.py``. Steps 1 and 2 as above make the
server's namespaces and root. Each run is then a fork of the server that leads a process group
of its own and takes new mount, IPC, PID and network namespaces; its child, the run's PID
namespace's first process, builds the run's root as in step 2, sets the run's rlimits and forks
the program, which drops to the run's uid as in step 3 and runs the harness. At the wall limit
the server kills the run's process group; either way, when that first process ends the kernel
kills whatever the program left.

Any failure while setting up exits 125, which the host reads as "could not set up".
"""

import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import sys
import time

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_REMOUNT = 0x20
MS_NOATIME = 0x400
MS_NODIRATIME = 0x800
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000
MS_RELATIME = 0x200000
MNT_DETACH = 0x2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38

#: statvfs flag -> mount flag: a read-only remount of a bind must keep these (in a user
#: namespace the kernel refuses to clear them).
KEPT_MOUNT_FLAGS = {
    os.ST_NOSUID: MS_NOSUID,
    os.ST_NODEV: MS_NODEV,
    os.ST_NOEXEC: MS_NOEXEC,
    os.ST_NOATIME: MS_NOATIME,
    os.ST_NODIRATIME: MS_NODIRATIME,
    os.ST_RELATIME: MS_RELATIME,
}

#: pivot_root has no libc wrapper: its system call number per machine.
PIVOT_ROOT_CALLS = {
    "x86_64": 155,
    "aarch64": 41,
    "arm64": 41,
    "riscv64": 41,
    "ppc64le": 203,
    "ppc64": 203,
    "s390x": 217,
    "i686": 217,
    "i386": 217,
}

SETUP_FAILED = 125

#: Seconds between kills of a run past its wall limit until its process is gone.
KILL_RETRY_SECONDS = 0.1


libc = ctypes.CDLL(None, use_errno=True)


def check(result, what):
    """Raise OSError naming ``what`` when a libc call returned -1."""
    if result == -1:
        number = ctypes.get_errno()
        raise OSError(number, what + ": " + os.strerror(number))
    return result


def as_bytes(text):
    return None if text is None else text.encode()


def mount(source, target, fstype, flags, data=None):
    check(
        libc.mount(
            as_bytes(source),
            as_bytes(target),
            as_bytes(fstype),
            ctypes.c_ulong(flags),
            as_bytes(data),
        ),
        "mount " + target,
    )


def bind_read_only(source, target):
    """``mount -o bind,ro`` that also forbids set-user-ID programs and device files."""
    mount(source, target, None, MS_BIND)
    kept = 0
    for statvfs_flag, mount_flag in KEPT_MOUNT_FLAGS.items():
        if os.statvfs(target).f_flag & statvfs_flag:
            kept |= mount_flag
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


def exit_status(status):
    """A waited-for process's status as a shell reports it: its exit code, or 128 + signal."""
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def wait_and_exit(pid):
    """Wait for ``pid`` and leave with its status, whatever else happens. Every other child
    that ends meanwhile is collected too: in a PID namespace's first process those are what
    the program left, whose zombies would otherwise count against its process limit."""
    while True:
        try:
            ended, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if ended == pid:
            os._exit(exit_status(status))


def enter_namespaces(uid):
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS
    if uid is None:
        outer_uid, outer_gid = os.getuid(), os.getgid()
        check(libc.unshare(flags | CLONE_NEWUSER), "unshare")
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"0 {outer_uid} 1"),
            ("gid_map", f"0 {outer_gid} 1"),
        ):
            with open("/proc/self/" + name, "w") as handle:
                handle.write(text)
    else:
        check(libc.unshare(flags), "unshare")
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def build_root(disk_bytes, uid, links, folders):
    """The run's root filesystem in the folder this process starts in, then moved into."""
    here = os.getcwd()
    mount("tmpfs", here, "tmpfs", MS_NOSUID | MS_NODEV, f"size={disk_bytes},mode=0755")
    os.chdir(here)  # onto the tmpfs, which now hides the host folder
    for name in ["usr", "proc", "dev", ".host", *folders]:
        os.mkdir(name)
    for name in ("tmp", "dev/shm"):
        os.mkdir(name)
        os.chmod(name, 0o1777)
    os.mkdir("work", 0o700)
    if uid is not None:
        os.chown("work", uid, uid)
    bind_read_only("/usr", "usr")
    mount("proc", "proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    for target in links:
        os.symlink(target, target.split("/", 1)[1])
    for name in folders:
        bind_read_only("/" + name, name)
    for node in ("null", "zero", "random", "urandom"):
        open("dev/" + node, "w").close()
        mount("/dev/" + node, "dev/" + node, None, MS_BIND)
    call = PIVOT_ROOT_CALLS.get(os.uname().machine)
    if call is None:
        raise OSError("pivot_root: no system call number known for " + os.uname().machine)
    check(libc.syscall(call, b".", b".host"), "pivot_root")
    os.chdir("/")
    check(libc.umount2(b"/.host", MNT_DETACH), "umount /.host")
    os.rmdir("/.host")


def drop_privileges(uid):
    """Become ``uid`` with no groups and no capabilities, for good (root only)."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last_capability = int(handle.read())
    for capability in range(last_capability + 1):
        check(libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0), "drop capability")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    # setresuid cleared the permitted and effective sets; clear the inheritable one too.
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)
    check(libc.capset(header, (ctypes.c_uint32 * 6)()), "capset")


def confine(config):
    """Return only in the process that is to run the program, confined (see the module)."""
    uid = config["uid"]
    try:
        enter_namespaces(uid)
        first = os.fork()
    except Exception:  # noqa: BLE001  (any failure here means: could not set up)
        os._exit(SETUP_FAILED)
    if first:
        wait_and_exit(first)
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        build_root(config["disk_bytes"], uid, config["links"], config["folders"])
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
        program = os.fork()
    except Exception:  # noqa: BLE001
        os._exit(SETUP_FAILED)
    if program:
        wait_and_exit(program)
    try:
        if uid is not None:
            drop_privileges(uid)
        # Changing user made this process undumpable (its /proc files root's); an exec would
        # have undone that, and nothing privileged is left to protect.
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir("/work")
    except Exception:  # noqa: BLE001
        os._exit(SETUP_FAILED)


# ---- serving: one confined interpreter that forks a confined run per program (as root) ------

#: Where a run's root is built, in the server's own root.
NEXT_ROOT = "/.next"

RLIMITS = {
    "cpu_seconds": (resource.RLIMIT_CPU, 1),
    "memory_bytes": (resource.RLIMIT_AS, 0),
    "file_bytes": (resource.RLIMIT_FSIZE, 0),
    "processes": (resource.RLIMIT_NPROC, 0),
}


def close_descriptors_from(lowest):
    """Close every descriptor from ``lowest`` up (listed, not counted up to a limit: the
    control socket's number comes from the host)."""
    for name in os.listdir("/proc/self/fd"):
        if int(name) >= lowest:
            with contextlib.suppress(OSError):
                os.close(int(name))


def set_limits(limits):
    """The run's rlimits (the CPU hard limit one second above the soft one)."""
    for name, (which, hard_extra) in RLIMITS.items():
        resource.setrlimit(which, (limits[name], limits[name] + hard_extra))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


#: Python's own dispositions at start-up, which the program should meet as in an interpreter
#: of its own (the server's handlers are not the program's business).
PYTHON_SIGNALS = {
    signal.SIGPIPE: signal.SIG_IGN,
    signal.SIGINT: signal.default_int_handler,
    signal.SIGCHLD: signal.SIG_DFL,
    signal.SIGTERM: signal.SIG_DFL,
}


def start_run(request, stdin_fd, stdout_fd, harness_code, links, folders):
    """Fork the process that runs one program; return its pid (in the server).

    That process leads a session of its own (the server kills its process group at the wall
    limit) and makes the run's namespaces: mount, IPC, PID and network. Its child is the
    PID namespace's first process, which builds the run's root and forks the program; when it
    ends, or is killed with the group, the kernel kills everything the program left."""
    pid = os.fork()
    if pid:
        return pid
    try:
        os.setsid()  # a process group to kill, and a scheduling group of its own
        os.dup2(stdin_fd, 0)
        os.dup2(stdout_fd, 1)
        sink = os.open("/dev/null", os.O_WRONLY)
        os.dup2(sink, 2)
        close_descriptors_from(3)  # the control socket and every other run's descriptors
        signal.set_wakeup_fd(-1)
        for number, disposition in PYTHON_SIGNALS.items():
            signal.signal(number, disposition)
        check(libc.unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWPID | CLONE_NEWNET), "unshare")
        first = os.fork()
    except BaseException:  # noqa: BLE001
        os._exit(SETUP_FAILED)
    if first:
        wait_and_exit(first)
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        os.chdir(NEXT_ROOT)
        build_root(request["limits"]["disk_bytes"], request["uid"], links, folders)
        set_limits(request["limits"])
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no new privileges")
        program = os.fork()
    except BaseException:  # noqa: BLE001
        os._exit(SETUP_FAILED)
    if program:
        wait_and_exit(program)
    try:
        drop_privileges(request["uid"])
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
        os.chdir("/work")
    except BaseException:  # noqa: BLE001
        os._exit(SETUP_FAILED)
    try:
        exec(harness_code, {"__name__": "__main__"})
    except BaseException:  # noqa: BLE001  (the harness failed: the host reads its output)
        os._exit(1)
    os._exit(0)


class Run:
    """A program the server runs: where to answer, as whom, until when."""

    def __init__(self, reply, uid, deadline):
        self.reply, self.uid, self.deadline = reply, uid, deadline
        self.timed_out = False


def answer(run, status):
    """Tell the host how ``run`` ended (its process's wait ``status``)."""
    if run.timed_out:
        message = {"returncode": None, "enforced": "timeout"}
    else:
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        message = {"returncode": code, "enforced": ""}
    with contextlib.suppress(OSError):  # the host stopped waiting
        run.reply.send(json.dumps(message).encode())
    run.reply.close()


def serve(config, harness_source):
    """Answer run requests on the control socket until it closes (see the host's
    ``fork_server.py`` for the messages)."""
    harness_code = compile(harness_source, "harness", "exec")
    control = socket.socket(fileno=config["control_fd"])
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    os.mkdir(NEXT_ROOT)
    control.send(b"ready")
    runs = {}  # pid -> Run
    while True:
        waiting = [run.deadline for run in runs.values()]
        timeout = max(0.0, min(waiting) - time.monotonic()) if waiting else None
        readable, _, _ = select.select([control, wakeup_read], [], [], timeout)
        if wakeup_read in readable:
            os.read(wakeup_read, 4096)
        if control in readable:
            message, fds, _, _ = socket.recv_fds(control, 65536, 3)
            if not message:  # the host closed its end: end every run, then the namespace
                os._exit(0)
            request = json.loads(message)
            stdin_fd, stdout_fd, reply_fd = fds
            reply = socket.socket(fileno=reply_fd)
            try:
                pid = start_run(
                    request, stdin_fd, stdout_fd, harness_code, config["links"], config["folders"]
                )
            except OSError:  # no process to be had (EAGAIN): this run could not start
                with contextlib.suppress(OSError):
                    reply.send(json.dumps({"returncode": SETUP_FAILED, "enforced": ""}).encode())
                reply.close()
            else:
                deadline = time.monotonic() + request["limits"]["wall_seconds"]
                runs[pid] = Run(reply, request["uid"], deadline)
            os.close(stdin_fd)
            os.close(stdout_fd)
        now = time.monotonic()
        for pid, run in runs.items():
            if run.deadline <= now:
                # Again until it is gone: before the run's process has made its session the
                # group is not there yet, and only it is to be killed.
                run.timed_out = True
                run.deadline = now + KILL_RETRY_SECONDS
                try:
                    os.killpg(pid, signal.SIGKILL)  # its namespaces go with their first process
                except ProcessLookupError:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            run = runs.pop(pid, None)
            if run is not None:
                answer(run, status)


def start_server(config, harness_source):
    """Enter the namespaces, build the server's root and serve (never returns)."""
    try:
        enter_namespaces(0)
        first = os.fork()
    except BaseException:  # noqa: BLE001
        os._exit(SETUP_FAILED)
    if first:
        os.close(config["control_fd"])
        wait_and_exit(first)
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        build_root(1024 * 1024, None, config["links"], config["folders"])
        serve(config, harness_source)
    except BaseException:  # noqa: BLE001
        os._exit(SETUP_FAILED)


if __name__ == "__main__":
    CONFIG = json.loads(sys.argv[1])
    if CONFIG["mode"] == "serve":
        start_server(CONFIG, sys.argv[2])
    confine(CONFIG)
