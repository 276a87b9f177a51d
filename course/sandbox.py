"""A sandbox for one submission's kernel: bubblewrap (`bwrap`) namespaces and rlimits.

`course.progress` runs every learner notebook in a kernel started by `SandboxedKernelManager`:

    bwrap --unshare-all (no network, own pids, own user)   --die-with-parent --new-session
          --clearenv (none of the grader's environment)    --tmpfs /tmp (size-capped: home,
          work folder and scratch, all in memory)         --ro-bind the system (/usr), the
          Python install, the virtual environment, the course package (and lesson data)
          --bind the one folder holding the kernel's sockets and connection file
      python -c LIMITS   (setrlimit: CPU seconds, address space, processes, file size)
        python -m ipykernel_launcher -f CONNECTION

The kernel talks to the grader over ZeroMQ on Unix sockets in that folder (transport "ipc"),
so it needs no network at all. Nothing else of the grader's files is visible: no home, no
other submission, not the course's notebooks or solutions. A process limit does not bind
root (Linux exempts uid 0), so a grader running as root also puts each sandbox in a pids
cgroup of its own where one can be made (`pids_cgroup`).

`problem()` says why there is no sandbox here (not Linux, no bwrap, user namespaces off),
with the one command that fixes it; None when there is one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager

INSTALL = "sudo apt-get install -y bubblewrap"  # Debian, Ubuntu; `dnf install bubblewrap` elsewhere
COURSE = Path(__file__).resolve().parent  # the package: the only part of the checkout shown


@dataclass(frozen=True)
class Limits:
    """Per notebook. The defaults fit a correct run of any lesson with room (docs/grading.md)."""

    cpu_seconds: int = 1800  # CPU time of each process (all its threads)
    memory_mb: int = 8192  # address space of each process
    processes: int = 256  # processes and threads inside the sandbox
    file_mb: int = 512  # the largest file one write may make
    disk_mb: int = 1024  # everything written: home, work folder and /tmp together (memory)
    output_mb: int = 16  # what the grader reads of the notebook's outputs


# Runs inside the sandbox, before the kernel: the limits, then the kernel itself.
LIMITS = """\
import json, os, resource, sys
for name, value in json.loads(sys.argv[1]).items():
    resource.setrlimit(getattr(resource, name), (value, value))
os.execv(sys.argv[2], sys.argv[2:])
"""


def rlimits(limits: Limits) -> dict[str, int]:
    mb = 1024 * 1024
    return {
        "RLIMIT_CPU": limits.cpu_seconds,
        "RLIMIT_AS": limits.memory_mb * mb,
        "RLIMIT_NPROC": limits.processes,
        "RLIMIT_FSIZE": limits.file_mb * mb,
        "RLIMIT_CORE": 0,
    }


def _system() -> list[str]:
    """The system, read-only: /usr and the merged-/usr links (or folders) beside it."""
    argv = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/alternatives"):
        path = Path(top)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), top]
        elif path.exists():
            argv += ["--ro-bind", top, top]
    for name in ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "nsswitch.conf"):
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return argv


def _python() -> str:
    """This interpreter by a path the sandbox shows: through the environment's resolved folder
    (a `.venv` reached through a symbolic link is not shown under the link's name)."""
    executable = Path(sys.executable)
    try:
        return str(Path(sys.prefix).resolve() / executable.relative_to(sys.prefix))
    except ValueError:  # not inside sys.prefix: as it is
        return str(executable)


def _read_only() -> list[Path]:
    """The Python install, the virtual environment, the course package, the lesson data."""
    paths = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), COURSE}
    paths.add(Path(sysconfig.get_paths()["purelib"]).resolve())
    data = os.environ.get("COURSE_DATA_DIR") or str(COURSE.parent / "data")
    if Path(data).is_dir():
        paths.add(Path(data).resolve())
    # A path inside another is already there; binding it twice would hide nothing but costs.
    return sorted(p for p in paths if not any(q != p and q in p.parents for q in paths))


def bwrap_argv(own: Path, limits: Limits, env: dict[str, str]) -> list[str]:
    """bwrap's arguments up to the command: `own` (the sockets' folder) the only host folder
    it may write; `env` the only environment it gets."""
    argv = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    argv += _system()
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--size", str(limits.disk_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for path in _read_only():
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", str(own), str(own)]
    argv += ["--dir", "/tmp/home", "--dir", "/tmp/work", "--chdir", "/tmp/work"]
    settings = {
        "HOME": "/tmp/home",
        "TMPDIR": "/tmp",
        "PATH": f"{Path(_python()).parent}:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "agg",
        # the kernel imports the grader's own course package (bound read-only above), not
        # whatever an editable install's .pth names, which may be a folder not shown here
        "PYTHONPATH": str(COURSE.parent),
    }
    keep = (
        "OMP_NUM_THREADS",
        "MKL_NUM_THREADS",
        "COURSE_THREADS",
        "PYDEVD_DISABLE_FILE_VALIDATION",
    )
    settings.update({k: v for k, v in env.items() if k in keep})
    if Path(os.environ.get("COURSE_DATA_DIR") or "/nonexistent").is_dir():
        settings["COURSE_DATA_DIR"] = str(Path(os.environ["COURSE_DATA_DIR"]).resolve())
    for key, value in settings.items():
        argv += ["--setenv", key, value]
    return argv


@lru_cache(maxsize=1)
def problem() -> str | None:
    """Why there is no sandbox on this machine (what is missing, the command that fixes it),
    or None when there is one: a real bwrap call is tried once per run."""
    if not sys.platform.startswith("linux"):
        return (
            f"this is not Linux ({sys.platform}): the sandbox needs Linux namespaces; grade "
            "inside a Linux container or virtual machine to get one"
        )
    if shutil.which("bwrap") is None:
        return f"bubblewrap (bwrap) is not installed: install it with `{INSTALL}`"
    basic = ["bwrap", "--unshare-all", "--ro-bind", "/", "/"]
    full = basic + ["--die-with-parent", "--new-session", "--clearenv", "--size", "1048576"]
    full += ["--tmpfs", "/tmp"]
    for argv in (basic, full):
        try:
            tried = subprocess.run(
                argv + ["--", "/bin/true"], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"bwrap could not be run ({error})"
        if tried.returncode == 0:
            continue
        said = (tried.stderr.strip().splitlines() or ["no message"])[-1]
        if argv is full:
            return (
                f"this bwrap lacks an option the sandbox uses ({said}): install a newer "
                "bubblewrap (0.7 or later)"
            )
        return (
            f"bwrap is installed but cannot make a sandbox ({said}): user namespaces are "
            "disabled here; enable them with `sudo sysctl -w kernel.unprivileged_userns_clone=1` "
            "(Debian) or `sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu)"
        )
    return None


def pids_cgroup(limit: int) -> Path | None:
    """For a grader running as root, whom RLIMIT_NPROC does not bind: a fresh pids cgroup
    (v1 or v2) capped at `limit`, or None where none can be made."""
    if os.geteuid() != 0:
        return None
    for root in (Path("/sys/fs/cgroup/pids"), Path("/sys/fs/cgroup")):  # v1, then v2
        if not (root / "cgroup.procs").exists():
            continue
        group = root / f"course-progress-{uuid.uuid4().hex[:12]}"
        try:
            group.mkdir()
            (group / "pids.max").write_text(str(limit))
            return group
        except OSError:
            remove_cgroup(group)
    return None


def remove_cgroup(group: Path | None) -> None:
    """Kill what is left in `group` and remove it."""
    if group is None or not group.exists():
        return
    try:
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        for _ in range(100):
            try:
                group.rmdir()
                return
            except OSError:
                time.sleep(0.05)
    except OSError:
        pass


class SandboxedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel runs under bwrap with `limits`, talking over Unix sockets
    in `own` (a folder the grader made and removes)."""

    def __init__(self, own: Path, limits: Limits, **kwargs):
        super().__init__(kernel_name="python3", transport="ipc", **kwargs)
        self.own, self.limits = Path(own), limits
        self.ip = str(self.own / "kernel")
        self.connection_file = str(self.own / "kernel.json")
        self.cgroup = pids_cgroup(limits.processes)
        self.sandbox_env: dict[str, str] = {}

    async def _async_pre_start_kernel(self, **kw):
        self.sandbox_env = dict(kw.get("env") or os.environ)
        cmd, kw = await super()._async_pre_start_kernel(**kw)
        # The kernel is in a session of its own (--new-session): a signal to the grader's
        # process group would not reach it, an interrupt message on the control channel does.
        assert self.kernel_spec is not None
        self.kernel_spec.interrupt_mode = "message"
        return cmd, kw

    def format_kernel_cmd(self, extra_arguments=None):
        kernel = super().format_kernel_cmd(extra_arguments)
        kernel = [_python() if part == sys.executable else part for part in kernel]
        wrapped = bwrap_argv(self.own, self.limits, self.sandbox_env)
        wrapped += ["--", _python(), "-c", LIMITS, json.dumps(rlimits(self.limits))]
        wrapped += kernel
        if self.cgroup is not None:  # join the cgroup, then become bwrap
            join = 'echo $$ > "$0" && exec "$@"'
            wrapped = ["/bin/sh", "-c", join, str(self.cgroup / "cgroup.procs")] + wrapped
        return wrapped

    async def _async_cleanup_resources(self, restart: bool = False) -> None:
        await super()._async_cleanup_resources(restart)
        self.remove_cgroup()

    cleanup_resources = _async_cleanup_resources

    def remove_cgroup(self) -> None:
        remove_cgroup(self.cgroup)
        self.cgroup = None
