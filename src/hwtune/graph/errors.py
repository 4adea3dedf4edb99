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
        first = str(self.problems[0]) if self.problems else "invalid model"
        more = len(self.problems) - 1
        msg = first + (f" (+{more} more)" if more > 0 else "")
        if source:
            # line:column locations attach to the file name as compilers do.
            glue = ":" if self.problems and _LINE_COL.match(self.problems[0].location) else ": "
            msg = f"{source}{glue}{msg}"
        super().__init__(msg)


def fail(location, message, source=None):
    """Raise a GraphError with a single problem."""
    raise GraphError([Problem(location, message)], source)
