"""Benchmarks printed in sections (`--only a,b`): choosing the sections and
printing each one's lines as soon as it is measured."""

import sys
from typing import Callable, Dict, List, Optional


def chosen_sections(only: str, sections: Dict[str, Callable]) -> Optional[List[str]]:
    """The names --only lists, in its order; None after one error line on
    stderr when it names a section there is not."""
    wanted = [x.strip() for x in only.split(",") if x.strip()]
    bad = [x for x in wanted if x not in sections]
    if bad:
        print(f"unknown --only section {bad[0]!r}: choose from {', '.join(sections)}",
              file=sys.stderr)
        return None
    return wanted


def print_sections(wanted: List[str], sections: Dict[str, Callable], *args) -> None:
    """Each wanted section(*args, lines), its lines printed when it ends."""
    for name in wanted:
        lines: List[str] = []
        sections[name](*args, lines)
        print("\n".join(lines), flush=True)
