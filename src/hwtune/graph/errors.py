"""GraphError: every problem found in a model, each with its location."""

import re
from dataclasses import dataclass
from typing import List

from hwtune.errors import UsageError

_LINE_COL = re.compile(r"\d+:\d+$")


@dataclass(frozen=True)
class Problem:
    """One problem: where (`ops[12].inputs[1]`) and what."""

    location: str
    message: str

    def __str__(self):
        return f"{self.location}: {self.message}" if self.location else self.message


class GraphError(UsageError):
    """A model file that cannot be loaded, expanded or validated.

    The message is one line: the first problem, then "(+N more)" when there
    are others; `.problems` lists all of them in file order.
    """

    def __init__(self, problems, source=None):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems: List[Problem] = list(problems)
        self.source = source
        first = self.lines()[0]
        more = len(self.problems) - 1
        super().__init__(first + (f" (+{more} more)" if more > 0 else ""))

    def lines(self) -> List[str]:
        """Every problem as one line, prefixed with the file as compilers do
        (`m.json:3:14: ...`, `m.json: ops[2].op: ...`)."""
        out = []
        for p in self.problems or [Problem("", "invalid model")]:
            text = str(p)
            if self.source:
                glue = ":" if _LINE_COL.match(p.location) else ": "
                text = f"{self.source}{glue}{text}"
            out.append(text)
        return out


def fail(location, message, source=None):
    """Raise a GraphError with a single problem."""
    raise GraphError([Problem(location, message)], source)
