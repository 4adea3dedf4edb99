"""Entry point: the `hwtune` command group, error handling, registration."""

from __future__ import annotations

import os
import sys

import click

from hwtune import __version__
from hwtune.cli.options import example
from hwtune.errors import HwtuneError, Interrupted


def _fail(message: str, code: int):
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


class HwtuneGroup(click.Group):
    """Turns the library's typed errors into one line on stderr + exit code.

    The library raises, never prints; this is the one place that decides what
    the user sees. Ctrl-C outside a scan (which raises Interrupted itself)
    also exits 130 without a traceback."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except HwtuneError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", Interrupted.exit_code)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click reports its own usage errors (exit 2)
        except Exception as exc:  # a bug: still one line, the traceback on request
            if os.environ.get("HWTUNE_DEBUG"):
                raise
            _fail(f"internal error: {type(exc).__name__}: {exc} (a bug in hwtune; rerun with "
                  "HWTUNE_DEBUG=1 for the traceback and report it)", 1)


@click.group(cls=HwtuneGroup, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=example("hwtune scan --quick"))
@click.version_option(__version__, prog_name="hwtune")
def cli():
    """Benchmark and autotune deep-learning graphs on multicore CPUs.

    Results go to results.db (or --db PATH / $HWTUNE_DB).
    """


def _register():
    from hwtune.cli.check_cmd import check
    from hwtune.cli.compare_cmd import compare
    from hwtune.cli.import_cmd import import_cmd
    from hwtune.cli.model_cmd import model
    from hwtune.cli.plan_cmd import plan
    from hwtune.cli.report_cmd import report
    from hwtune.cli.run_cmd import run
    from hwtune.cli.scan_cmd import scan
    from hwtune.cli.tune_cmd import tune_graph
    cli.add_command(check)
    cli.add_command(compare)
    cli.add_command(import_cmd)
    cli.add_command(model)
    cli.add_command(plan)
    cli.add_command(report)
    cli.add_command(run)
    cli.add_command(scan)
    cli.add_command(tune_graph)


_register()


def main():
    cli(prog_name="hwtune")


if __name__ == "__main__":
    main()
