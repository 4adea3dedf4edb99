"""Every hwtune command (and the group) has help text that ends with examples."""

import click
import pytest
from click.testing import CliRunner

from hwtune.cli.main import cli


def _commands(group, prefix=("hwtune",)):
    yield prefix, group
    if isinstance(group, click.Group):
        for name, cmd in sorted(group.commands.items()):
            yield from _commands(cmd, prefix + (name,))


ALL = list(_commands(cli))


def test_there_is_at_least_the_scan_command():
    assert ("hwtune", "scan") in [p for p, _ in ALL]


@pytest.mark.parametrize("path,cmd", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_help_ends_with_an_example(path, cmd):
    result = CliRunner().invoke(cli, list(path[1:]) + ["--help"])
    assert result.exit_code == 0, result.output
    lines = [ln.strip() for ln in result.output.splitlines() if ln.strip()]
    assert cmd.help and cmd.help.strip(), f"{' '.join(path)} has no help text"
    heads = [i for i, ln in enumerate(lines) if ln in ("Example:", "Examples:")]
    assert heads, result.output
    examples = lines[heads[-1] + 1:]
    assert len(examples) == 1 if lines[heads[-1]] == "Example:" else len(examples) > 1, \
        result.output
    for ex in examples:
        assert ex.startswith(" ".join(path)), ex
    for p in cmd.params:
        if isinstance(p, click.Option) and not p.hidden:
            assert p.help, f"{' '.join(path)} {p.opts[0]} has no help"
