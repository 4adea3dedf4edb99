"""Small readers for /proc and /sys files shared by the machine parsers.

Every reader returns None when the file is missing or unreadable: a field
the kernel does not expose is recorded as unknown, never guessed.
"""

from pathlib import Path
from typing import List, Optional


def read_text(path: Path) -> Optional[str]:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_int(path: Path) -> Optional[int]:
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text, 0)
    except ValueError:
        return None


def parse_cpulist(text: Optional[str]) -> Optional[List[int]]:
    """Kernel cpu list syntax ("0-3,8,10-11") to a sorted list; None if malformed."""
    if text is None:
        return None
    cpus = set()
    try:
        for part in text.split(","):
            part = part.strip()
            if not part:
                continue
            if "-" in part:
                lo, hi = part.split("-", 1)
                cpus.update(range(int(lo), int(hi) + 1))
            else:
                cpus.add(int(part))
    except ValueError:
        return None
    return sorted(cpus)


def read_cpulist(path: Path) -> Optional[List[int]]:
    return parse_cpulist(read_text(path))


def parse_size(text: Optional[str]) -> Optional[int]:
    """sysfs cache size ("32K", "1024K", "2M", or bare bytes) to bytes."""
    if not text:
        return None
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    scale = units.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in units else text
    try:
        return int(digits) * scale
    except ValueError:
        return None


def numbered_dirs(parent: Path, prefix: str) -> List[int]:
    """Indices of parent/<prefix><N> directories (cpu0, node1, index2...)."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    found = []
    for entry in entries:
        suffix = entry.name[len(prefix):]
        if entry.name.startswith(prefix) and suffix.isdigit() and entry.is_dir():
            found.append(int(suffix))
    return sorted(found)
