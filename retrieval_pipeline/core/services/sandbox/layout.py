"""What the sandbox shows: the bwrap command line (namespaces, the read-only layout, a minimal /etc), the
interpreter's environment, and the seccomp filter.

Nothing of the host is seen but this; the root is a tmpfs remounted read-only:

* ``/usr`` read-only; ``/bin``, ``/sbin``, ``/lib``, ``/lib32``, ``/lib64``, ``/libx32`` as on the host
  (symlinks into /usr on a merged-/usr system, read-only binds otherwise);
* a minimal ``/etc``: a generated ``passwd`` and ``group`` (root and the sandbox user only),
  ``nsswitch.conf`` and ``hosts``, plus the host's ``ld.so.cache`` and ``localtime``. No shadow,
  gshadow, sudoers, ssh keys, certificates or anything else of the host's /etc;
* the environment of ``python``, read-only, at its own path: the venv (the folder holding
  ``pyvenv.cfg``), the base installation it runs on (the prefix of the resolved interpreter, of every
  link on the way to it, and of pyvenv.cfg's ``home``; paths under /usr are already there), then
  ``extra_ro_binds``. Not the project: an editable install's source is not shown, and proofs need only
  the library under test. Parent folders of these paths exist, holding nothing else (e.g. ``/root``
  shows only ``.pyenv/versions/<v>`` when the interpreter lives there);
* ``--dev /dev``, ``--proc /proc`` (its own pid namespace), a private ``--tmpfs /tmp`` (capped at
  ``file_mb``), and the run's fresh working directory, read-write, owned by the sandbox user;
* ``--clearenv`` plus a minimal PATH/HOME/LANG: no variable of the parent (tokens, keys) is inherited;
  ``--die-with-parent --new-session``. bwrap itself, which stays in the sandbox as its pid 1, starts
  with a fixed environment of its own (``/proc/1/environ`` shows nothing of the pipeline's) and reads its
  options from a descriptor (``--args``: ``/proc/1/cmdline`` shows the program's argv only);
* a seccomp filter (bwrap's ``--seccomp``): ``ptrace``, ``process_vm_readv``/``writev``, ``kcmp`` and
  ``pidfd_getfd`` fail with EPERM, as does any system call of another ABI (x86_64 and aarch64; elsewhere
  no filter). bwrap's pid 1 is dumpable by the sandbox user: without the filter a proof could attach to it.
  A proof can still read and write its memory through ``/proc/1/mem`` (no refused call is needed), but
  code that took it over would gain nothing: it runs as the sandbox user with no capability, with
  ``no_new_privs`` and under the same filter, and it holds no result descriptor.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

from retrieval_pipeline.core.services.sandbox.settings import SandboxError, SandboxSettings

#: Top-level system paths shown as on the host (symlinks stay symlinks); /usr itself is bound read-only.
_SYSTEM_TOP = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: Host files of /etc that the interpreter may read and that hold no secret.
_HOST_ETC = ("ld.so.cache", "localtime")

#: Per machine: the seccomp audit arch, and the system calls a proof is refused (EPERM): ptrace,
#: process_vm_readv, process_vm_writev, kcmp, pidfd_getfd. Another process's memory and descriptors stay
#: out of reach even where the kernel's permission checks would allow them (bwrap's pid 1 is dumpable).
_SECCOMP_DENY = {
    "x86_64": (0xC000003E, (101, 310, 311, 312, 438)),
    "aarch64": (0xC00000B7, (117, 270, 271, 272, 438)),
}


#: A name the sandbox's environment accepts (``env`` of :func:`bwrap_command`).
ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


def reachable(path: Path, uid: int, gid: int) -> bool:
    """True when ``uid``/``gid`` can walk to ``path`` and read it, by its mode bits (ACLs are not read)."""
    try:
        resolved = Path(os.path.realpath(path))
        chain = [*reversed(resolved.parents), resolved]
        for index, node in enumerate(chain):
            info = os.stat(node)
            is_leaf = index == len(chain) - 1
            need = (4 | (1 if stat.S_ISDIR(info.st_mode) else 0)) if is_leaf else 1
            shift = 6 if info.st_uid == uid else 3 if info.st_gid == gid else 0
            if (info.st_mode >> shift) & need != need:
                return False
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=32)
def environment_paths(python: Path) -> tuple[Path, ...]:
    """The folders the interpreter ``python`` needs, outside /usr: its venv and its base installation.

    From the venv (``pyvenv.cfg`` beside ``bin/``) and its ``home``, and from every link on the way from
    ``python`` to the real binary (``<prefix>/bin/python3.x`` -> ``<prefix>``). Nested folders collapse
    into the outer one. The interpreter is never executed on the host.
    """
    python = Path(os.path.abspath(python))
    found: list[Path] = []
    venv = python.parent.parent
    if (venv / "pyvenv.cfg").is_file():
        found.append(venv)
        home = _pyvenv_home(venv / "pyvenv.cfg")
        if home is not None:
            found.append(Path(os.path.abspath(home)).parent)
    for hop in _link_chain(python):
        found.append(hop.parent.parent)
    prefixes = [p for p in dict.fromkeys(found) if not _shown_by_system(p)]
    outer = [p for p in prefixes if not any(p != q and p.is_relative_to(q) for q in prefixes)]
    for path in outer:
        if len(path.parts) < 3:
            raise SandboxError(f"the interpreter {python} lives in {path}, too broad a folder to show in the sandbox; "
                               "use an interpreter from a venv or an installation folder of its own")  # fmt: skip
    return tuple(outer)


def _pyvenv_home(cfg: Path) -> str | None:
    """The ``home`` key of a ``pyvenv.cfg`` (the base interpreter's bin folder)."""
    for line in cfg.read_text(encoding="utf-8", errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return value.strip()
    return None


def _link_chain(path: Path, max_hops: int = 40) -> list[Path]:
    """``path``, then every symlink target on the way to the real file (absolute, not resolved further)."""
    chain = [path]
    for _ in range(max_hops):
        current = chain[-1]
        if not current.is_symlink():
            break
        target = Path(os.readlink(current))
        chain.append(Path(os.path.normpath(current.parent / target)))
    resolved = Path(os.path.realpath(path))
    return chain if resolved in chain else chain + [resolved]


def _shown_by_system(path: Path) -> bool:
    """True when ``path`` is inside /usr or a top-level system folder that the sandbox shows anyway."""
    return any(path == Path(top) or path.is_relative_to(top) for top in ("/usr", *_SYSTEM_TOP))


@functools.lru_cache(maxsize=1)
def _system_args() -> tuple[str, ...]:
    """``/usr`` read-only, and /bin, /sbin, /lib* as on the host (symlinks stay symlinks)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in _SYSTEM_TOP:
        path = Path(top)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), top]
        elif path.is_dir():
            args += ["--ro-bind", top, top]
    return tuple(args)


def _etc_args(base: Path, uid: int) -> list[str]:
    """A minimal /etc: generated passwd, group, nsswitch.conf, hosts; the host's ld.so.cache, localtime."""
    name = "nobody" if uid == 65534 else "sandbox"
    generated = {
        "passwd": f"root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n{name}:x:{uid}:{uid}:{name}:/nonexistent:/usr/sbin/nologin\n",
        "group": f"root:x:0:\n{'nogroup' if uid == 65534 else name}:x:{uid}:\n",
        "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
    }
    etc = base / "etc"
    etc.mkdir()
    etc.chmod(0o755)
    args: list[str] = []
    for filename, text in generated.items():
        (etc / filename).write_text(text, encoding="utf-8")
        (etc / filename).chmod(0o644)
        args += ["--ro-bind", str(etc / filename), f"/etc/{filename}"]
    for filename in _HOST_ETC:
        args += ["--ro-bind-try", f"/etc/{filename}", f"/etc/{filename}"]
    return args


def bwrap_command(
    bwrap: str,
    base: Path,
    workdir: Path,
    argv: Sequence[str],
    settings: SandboxSettings,
    binds: Sequence[Path],
    staged: Mapping[Path, Path],
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """The bwrap argv: namespaces, the explicit read-only layout, private /tmp, writable workdir, cleared env
    (plus ``env``, set last)."""
    uid = str(settings.sandbox_uid)
    python_bin = str(Path(os.path.abspath(settings.python)).parent)
    command = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--uid", uid,
        "--gid", uid,
        "--disable-userns",
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",
        *_system_args(),
        *_etc_args(base, settings.sandbox_uid),
        "--dev", "/dev",
        "--proc", "/proc",
        "--size", str(settings.file_mb * 2**20), "--tmpfs", "/tmp",
    ]  # fmt: skip
    for path in dict.fromkeys(binds):
        command += ["--ro-bind", str(staged.get(path, path)), str(path)]
    command += [
        "--bind", str(workdir), str(workdir),
        "--remount-ro", "/",
        "--chdir", str(workdir),
        "--clearenv",
        "--setenv", "PATH", f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
        "--setenv", "HOME", str(workdir),
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "PYTHONHASHSEED", "0",
        "--setenv", "PYTHONNOUSERSITE", "1",
    ]  # fmt: skip
    for name, value in (env or {}).items():
        if not ENV_NAME.fullmatch(name):
            raise ValueError(f"not an environment variable name: {name!r}")
        command += ["--setenv", name, value]
    return [*command, "--", *argv]


@functools.lru_cache(maxsize=1)
def seccomp_program() -> bytes | None:
    """A classic BPF seccomp program for bwrap's ``--seccomp``: :data:`_SECCOMP_DENY` and every system call
    of another ABI (i386 through ``int 0x80``, x32) fail with EPERM; all else is allowed. None on a machine
    not listed (then nothing is filtered)."""
    machine = os.uname().machine
    if machine not in _SECCOMP_DENY:
        return None
    arch, denied = _SECCOMP_DENY[machine]
    ld_w_abs, jeq_k, jge_k, ret_k = 0x20, 0x15, 0x35, 0x06
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    body = [(ld_w_abs, 0, 0, 0)]  # the system call's number
    body += [(jeq_k, len(denied) - i, 0, nr) for i, nr in enumerate(denied)]  # to "deny" below
    body += [(ret_k, 0, 0, allow), (ret_k, 0, 0, deny)]
    head = [
        (ld_w_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq_k, 1, 0, arch),
        (ret_k, 0, 0, deny),  # another ABI
        (ld_w_abs, 0, 0, 0),
        (jge_k, 0, 1, 0x40000000),  # x32's numbers
        (ret_k, 0, 0, deny),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in head + body)
