"""Where results.db lives when no --db or $HWTUNE_DB names it.

A tuned config must be found wherever the user runs (issue #42: tuned in
the clone, `hwtune run` from another folder said "no tuned config"), and
commands run inside a checkout must not modify a tracked file. So, from
the current directory up to the filesystem root, the first folder that has

- `results.db`: that database;
- `results.seed.db` (a checkout of hwtune: the project's embedded results,
  tracked, read-only to hwtune): `results.db` beside it, created as a copy
  of the seed the first time it is needed. `results.db` itself is not
  tracked (.gitignore), so `git status` stays clean however much is tuned.

else the per-user database, $XDG_DATA_HOME/hwtune/results.db (default
~/.local/share/hwtune/results.db), shared by every folder without one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

NAME = "results.db"
SEED = "results.seed.db"


def user_db() -> Path:
    """The per-user database (its folder is created when written)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"),
                                                          ".local", "share")
    return Path(os.path.abspath(base)) / "hwtune" / NAME


def nearest(start: Optional[Path] = None) -> Path:
    """The database the lookup above finds from `start` (default: cwd).
    Nothing is created here (see seed_if_needed)."""
    here = Path(os.path.abspath(start or os.getcwd()))
    for d in (here, *here.parents):
        if (d / NAME).exists() or (d / SEED).is_file():
            return d / NAME
    return user_db()


def seed_if_needed(path: Path) -> None:
    """Before results.db at `path` is first opened: copy the seed beside it
    into place when there is one (atomically: a concurrent first command
    sees the whole copy or none), and create the per-user folder."""
    if path.exists():
        return
    seed = path.with_name(SEED)
    if path.name == NAME and seed.is_file():
        fd, tmp = tempfile.mkstemp(prefix=f".{NAME}.", dir=path.parent)
        os.close(fd)
        try:
            shutil.copyfile(seed, tmp)
            os.chmod(tmp, 0o644)
            if not path.exists():
                os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    elif path == user_db():
        path.parent.mkdir(parents=True, exist_ok=True)
