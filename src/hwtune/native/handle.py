"""The life cycle every C object owned from Python shares: created once,
destroyed exactly once (close(), the end of a with block, or garbage
collection), and its C calls' statuses checked in one way."""

import ctypes
from typing import Optional, Type

from hwtune.errors import UsageError
from hwtune.native import _lib


def c_getter(c_function: str) -> property:
    """A read-only property whose value is c_function(handle) (a C accessor
    of the object, its signature declared by the binding's module)."""
    fn = getattr(_lib.lib, c_function)
    return property(lambda self: fn(self.handle))


class Handle:
    """Owns one C object. Subclasses set _destroy (the C destroy function's
    name), _what (how messages name the object) and, when the object keeps
    a last-error text, _error (that function's name); they call _adopt()
    with the pointer the C constructor returned."""

    _destroy = ""
    _error = ""
    _what = "object"
    _usage: Type[UsageError] = UsageError  # the error class for caller mistakes
    _h: Optional[int] = None

    def _adopt(self, h: int) -> None:
        self._h = h

    @property
    def handle(self) -> int:
        if self._h is None:
            raise self._usage(f"the {self._what} is closed")
        return self._h

    @property
    def closed(self) -> bool:
        return self._h is None

    def _last_error(self) -> str:
        if not self._error or self._h is None:
            return ""
        # Declared (restype c_char_p) by the subclass's module.
        text = getattr(_lib.lib, self._error)(ctypes.c_void_p(self._h))
        return (text or b"").decode(errors="replace")

    def _check(self, status: int, what: str = "") -> int:
        """status when >= 0; otherwise the typed error, with the object's own
        last-error text when it keeps one."""
        if status >= 0:
            return status
        raise _lib.status_error(status, self._last_error(), what=what, usage=self._usage)

    def _needs(self, *owners: "Handle") -> None:
        """This C object uses the owners' C objects (its graph, its pool):
        each owner closes it before closing itself. Objects in a garbage
        cycle (the frames a KeyboardInterrupt's traceback holds) are
        finalised in any order, and an owner destroyed first left this
        object's destroy reading freed memory: a crash at exit after Ctrl-C
        in tune-graph (1 CI run)."""
        self._owners = [o for o in owners if isinstance(o, Handle)]
        for o in self._owners:
            o.__dict__.setdefault("_dependents", []).append(self)

    def close(self) -> None:
        for d in list(self.__dict__.get("_dependents", ())):
            d.close()
        h, self._h = self._h, None  # close once, even when destroy raises
        if h is not None:
            getattr(_lib.lib, self._destroy)(ctypes.c_void_p(h))
        for o in self.__dict__.get("_owners", ()):
            deps = o.__dict__.get("_dependents", [])
            if self in deps:
                deps.remove(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        # At interpreter exit the module may be half torn down: then the OS
        # reclaims the object.
        if getattr(self, "_h", None) is not None and getattr(_lib, "lib", None) is not None:
            self.close()
