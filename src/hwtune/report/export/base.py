"""The one interface every output format implements (hyperfine's Exporter):
a name, the --format value, and one renderer per kind of document the
format can show."""

from typing import Any, Callable, Dict, Mapping, Tuple

Renderer = Callable[[Any], str]


class Exporter:
    """One output format. render() gives the text for a file; write() prints
    it on a stream (the terminal format colours it when the stream is a
    terminal, every other format writes the same text)."""

    def __init__(self, name: str, renderers: Mapping[str, Renderer]):
        self.name = name
        self._renderers: Dict[str, Renderer] = dict(renderers)

    @property
    def kinds(self) -> Tuple[str, ...]:
        return tuple(self._renderers)

    def render(self, kind: str, data: Any) -> str:
        return self._renderers[kind](data)

    def write(self, kind: str, data: Any, stream) -> None:
        stream.write(self.render(kind, data))
