"""A throwaway PostgreSQL server for the deployment tests.

It uses Debian's ``postgresql`` binaries (``/usr/lib/postgresql/<version>/bin``). When they are missing
and the tests run as root, it installs the package with ``apt-get``. ``initdb`` runs in a new temporary
folder as an unprivileged user: ``nobody`` when the tests run as root (PostgreSQL refuses to run as
root), else the current user. The server listens on 127.0.0.1 only, on a free port, and requires a
password (md5: see :data:`AUTH`). The context manager stops it by its PID and removes the folder. Every wait is
bounded.

:class:`PostgresUnavailable` says why no server could be installed or started here. The tests skip with
that text, and only then.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

PG_ROOT = Path("/usr/lib/postgresql")
INSTALL_TIMEOUT_S = 600
INITDB_TIMEOUT_S = 180
READY_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30
#: Test-only speed-ups: nothing here must survive a crash.
#: The login method. Dagster's PostgreSQL storage opens a new connection for each query (SQLAlchemy's NullPool),
#: about 2,000 in the schedule-tick test; scram-sha-256's key stretching made each cost 12 ms (5 ms of it the
#: client's CPU) against md5's 4 ms. md5 still checks the password the instance reads from DAGSTER_PG_PASSWORD.
AUTH = "md5"
SERVER_SETTINGS = ("fsync=off", "synchronous_commit=off", "full_page_writes=off", "max_connections=60")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server can be installed or started on this machine; the message says why."""


@dataclass(frozen=True)
class PostgresServer:
    """A running server: where it listens, whom it lets in, and the PID that stops it."""

    host: str
    port: int
    user: str
    password: str
    pid: int
    data_dir: Path
    version: str

    def connect_kwargs(self, db: str = "postgres") -> dict[str, object]:
        """Keyword arguments for ``psycopg2.connect``."""
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password, "dbname": db, "connect_timeout": 10}

    def dagster_env(self, db: str) -> dict[str, str]:
        """The variables ``deploy/dagster.yaml`` reads, for database ``db`` on this server."""
        return {
            "DAGSTER_PG_HOST": self.host,
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_USERNAME": self.user,
            "DAGSTER_PG_PASSWORD": self.password,
            "DAGSTER_PG_DB": db,
        }

    def create_database(self, name: str) -> None:
        """``CREATE DATABASE name`` (a plain identifier: letters, digits, underscores)."""
        import psycopg2

        if not name.replace("_", "").isalnum():
            raise ValueError(f"database name {name!r} is not a plain identifier")
        conn = psycopg2.connect(**self.connect_kwargs())
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()

    def query(self, db: str, sql: str) -> list[tuple]:
        """Rows of one read-only query, straight from the server (not through Dagster)."""
        import psycopg2

        conn = psycopg2.connect(**self.connect_kwargs(db))
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return list(cur.fetchall())
        finally:
            conn.close()


def find_bin_dir(root: Path = PG_ROOT) -> Path | None:
    """The newest ``<root>/<version>/bin`` that has both ``initdb`` and ``postgres``."""
    if not root.is_dir():
        return None
    candidates = [d / "bin" for d in root.iterdir() if (d / "bin" / "initdb").is_file() and (d / "bin" / "postgres").is_file()]
    return max(candidates, key=lambda b: _version_key(b.parent.name), default=None)


def _version_key(name: str) -> tuple[int, ...]:
    return tuple(int(p) for p in name.split(".") if p.isdigit())


def install_postgresql(timeout_s: int = INSTALL_TIMEOUT_S) -> Path:
    """Debian's ``postgresql`` package, installed with apt-get (root only). Returns its bin folder.

    Raises:
        PostgresUnavailable: not root, no apt-get, or the install failed or timed out.
    """
    if os.geteuid() != 0:
        raise PostgresUnavailable(f"no PostgreSQL under {PG_ROOT} and not root: install it with `apt-get install -y postgresql`")
    if shutil.which("apt-get") is None:
        raise PostgresUnavailable(f"no PostgreSQL under {PG_ROOT} and no apt-get to install Debian's postgresql package")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    deadline = time.monotonic() + timeout_s
    errors = []
    for command in (
        ["apt-get", "install", "-y", "-qq", "postgresql"],
        ["apt-get", "update", "-qq"],
        ["apt-get", "install", "-y", "-qq", "postgresql"],
    ):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=remaining)
        except subprocess.TimeoutExpired:
            errors.append(f"{' '.join(command)}: timed out")
            break
        if result.returncode != 0:
            errors.append(f"{' '.join(command)}: exit {result.returncode}: {result.stderr.strip()[-300:]}")
        bin_dir = find_bin_dir()
        if bin_dir is not None:
            return bin_dir
    raise PostgresUnavailable("Debian's postgresql package could not be installed: " + "; ".join(errors or ["no binaries after install"]))


def _server_user() -> pwd.struct_passwd:
    """Whom the server runs as: ``nobody`` for root, else the current (already unprivileged) user."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam("nobody")
    except KeyError as exc:
        raise PostgresUnavailable("running as root and there is no user 'nobody' to run PostgreSQL as") from exc


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user(user: pwd.struct_passwd) -> dict[str, object]:
    """``subprocess`` arguments that drop root for ``user`` (none when already that user)."""
    if os.geteuid() != 0:
        return {}
    return {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}


def _initdb(bin_dir: Path, workdir: Path, user: pwd.struct_passwd, db_user: str, password: str, env: Mapping[str, str]) -> Path:
    """A new cluster in ``workdir/data`` whose one superuser ``db_user`` logs in with ``password``."""
    pwfile = workdir / "pwfile"
    pwfile.write_text(password + "\n")
    os.chmod(pwfile, 0o600)
    if os.geteuid() == 0:
        os.chown(pwfile, user.pw_uid, user.pw_gid)
    data = workdir / "data"
    command = [str(bin_dir / "initdb"), "-D", str(data), "-U", db_user, "--pwfile", str(pwfile), f"--auth={AUTH}", "-E", "UTF8"]
    command += ["--locale=C", "--no-sync"]
    try:
        result = subprocess.run(
            command, cwd=workdir, env=dict(env), capture_output=True, text=True, timeout=INITDB_TIMEOUT_S, **_as_user(user)
        )
    except subprocess.TimeoutExpired as exc:
        raise PostgresUnavailable(f"initdb did not finish within {INITDB_TIMEOUT_S} s") from exc
    finally:
        pwfile.unlink(missing_ok=True)
    if result.returncode != 0:
        raise PostgresUnavailable(f"initdb failed (exit {result.returncode}): {result.stderr.strip()[-500:]}")
    return data


def _wait_ready(proc: subprocess.Popen, server: PostgresServer, log: Path, timeout_s: float) -> None:
    """Return once a password login succeeds; raise if the server exits or the time runs out."""
    import psycopg2

    deadline = time.monotonic() + timeout_s
    last_error = "no attempt"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PostgresUnavailable(f"postgres exited with {proc.returncode}: {log.read_text(errors='replace')[-800:]}")
        try:
            psycopg2.connect(**server.connect_kwargs()).close()
            return
        except psycopg2.OperationalError as exc:
            last_error = str(exc).strip()
            time.sleep(0.2)
    raise PostgresUnavailable(f"postgres was not ready within {timeout_s} s ({last_error}): {log.read_text(errors='replace')[-800:]}")


def stop_server(proc: subprocess.Popen) -> None:
    """Fast shutdown by PID (SIGINT), then SIGKILL when it does not stop within the bound."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT_S)


@contextmanager
def running_postgres(attempts: int = 3) -> Iterator[PostgresServer]:
    """A fresh PostgreSQL server on 127.0.0.1, stopped and deleted on exit.

    Raises:
        PostgresUnavailable: it cannot be installed or started here (the message says why).
    """
    bin_dir = find_bin_dir() or install_postgresql()
    user = _server_user()
    workdir = Path(tempfile.mkdtemp(prefix="retrieval-pg-", dir="/tmp"))  # /tmp: reachable by `nobody`
    proc: subprocess.Popen | None = None
    try:
        if os.geteuid() == 0:
            os.chown(workdir, user.pw_uid, user.pw_gid)
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C"}
        password = secrets.token_urlsafe(16)
        data = _initdb(bin_dir, workdir, user, "dagster", password, env)
        for attempt in range(attempts):
            port = _free_port()
            log = workdir / f"server-{attempt}.log"
            command = [str(bin_dir / "postgres"), "-D", str(data), "-h", "127.0.0.1", "-p", str(port), "-k", str(workdir)]
            for setting in SERVER_SETTINGS:
                command += ["-c", setting]
            with log.open("w") as out:
                proc = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT, **_as_user(user))
            server = PostgresServer("127.0.0.1", port, "dagster", password, proc.pid, data, bin_dir.parent.name)
            try:
                _wait_ready(proc, server, log, READY_TIMEOUT_S)
            except PostgresUnavailable:
                stop_server(proc)
                if attempt + 1 == attempts or "could not bind" not in log.read_text(errors="replace"):
                    raise
                continue  # the free port was taken in between: try another
            yield server
            return
    finally:
        if proc is not None:
            stop_server(proc)
        shutil.rmtree(workdir, ignore_errors=True)
