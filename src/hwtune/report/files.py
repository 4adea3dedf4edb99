"""Writing an exported document to a file: whole files atomically (a browser
or a CI upload never sees half a report), appended sections in place."""

import os
import tempfile
from pathlib import Path

from hwtune.errors import UsageError


def write_file(path, text: str, *, append: bool = False) -> None:
    """Write text to path (append: add it at the end, e.g. a CI job summary
    that other steps write too). UsageError naming the path on failure."""
    p = Path(path)
    parent = Path(os.path.abspath(p)).parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {p}: directory {parent} does not exist")
    # A pipe or a device (/dev/stdout) is written in place: replacing it
    # with a regular file would be wrong, and as root it would succeed.
    if append or (p.exists() and not p.is_file()):
        try:
            with open(p, "a" if append else "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as exc:
            raise UsageError(f"cannot write {p}: {exc.strerror or exc}") from None
        return
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide it from a web server
        os.replace(tmp, p)
    except OSError as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        raise UsageError(f"cannot write {p}: {exc.strerror or exc}") from None
