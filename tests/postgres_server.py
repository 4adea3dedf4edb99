"""A throwaway PostgreSQL server for tests: Debian's `postgresql` binaries,
a cluster made by initdb in a temporary folder, listening on a free local
port with trust authentication, stopped and removed afterwards. As root
(CI), the server runs as the `postgres` user: initdb refuses root."""

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from contextlib import contextmanager
from typing import Iterator, List, Optional

USER = "hwtune"


def find_bin_dir() -> Optional[str]:
    """Where initdb and pg_ctl are: PATH, else Debian's versioned folder."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return os.path.dirname(os.path.realpath(found))
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "initdb")) and os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def server() -> Iterator[str]:
    """Start a server with its cluster in a new temporary folder (not under
    pytest's, which the postgres user cannot enter); yields a SQLAlchemy URL
    of its `postgres` database; stops it and removes the folder."""
    folder = tempfile.mkdtemp(prefix="hwtune-pg-")
    try:
        with _server(folder) as url:
            yield url
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def _server(folder: str) -> Iterator[str]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    as_user: List[str] = []
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
        os.chmod(folder, 0o755)
    data, sock = os.path.join(folder, "data"), os.path.join(folder, "sock")
    os.makedirs(sock)
    if as_user:
        os.chown(folder, owner.pw_uid, owner.pw_gid)
        os.chown(sock, owner.pw_uid, owner.pw_gid)
    port = _free_port()

    def run(*cmd):
        proc = subprocess.run(as_user + [os.path.join(bin_dir, cmd[0]), *cmd[1:]],
                              capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise RuntimeError(f"{cmd[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}")

    run("initdb", "-D", data, "-U", USER, "--auth=trust", "--no-sync", "-E", "UTF8")
    # fsync off: a test cluster is thrown away, and fsyncs on a shared disk
    # would only slow the tests.
    run("pg_ctl", "-D", data, "-w", "-t", "60", "-l", os.path.join(folder, "server.log"),
        "-o", f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
    try:
        yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
    finally:
        run("pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
