"""TOML reading on every supported Python: tomllib (3.11+) or tomli."""

from hwtune.errors import UsageError


def toml_module(what: str):
    """The TOML parser module; UsageError saying what needed it when
    neither is installed."""
    try:
        import tomllib
        return tomllib
    except ImportError:  # Python < 3.11
        try:
            import tomli
            return tomli
        except ImportError:
            raise UsageError(f"reading {what} needs Python >= 3.11 or the tomli package "
                             "(pip install tomli)") from None
