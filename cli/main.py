"""Entry point: the `hwtune` command group, error handling, registration."""

from __future__ import annotations

import os
import sys

import click

from hwtune import __version__
from hwtune.cli import streams
from hwtune.cli.options import example
from hwtune.errors import HwtuneError, Interrupted


def _fail(message: str, code: int):
    sys.exit(_report(message, code))


def _os_error(exc: OSError) -> str:
    """One line for an OSError: which file, and what the system said."""
    what = exc.strerror or str(exc)
    if exc.filename is not None:
        return f"{exc.filename}: {what}"
    return f"cannot write the output: {what}"


class HwtuneGroup(click.Group):
    """Turns the library's typed errors into one line on stderr + exit code.

    The library raises, never prints; this is the one place that decides what
    the user sees. Ctrl-C, SIGTERM and SIGHUP (streams.on_signal: all three
    go through what Ctrl-C does) exit 128 + the signal's number; an output
    that cannot be written (a missing directory, a full disk or stdout) is
    the user's to fix: exit 2, not the 'internal error' of a bug."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except Interrupted as exc:
            _fail(f"{exc}{streams.signal_note()}", streams.interrupt_exit_code())
        except HwtuneError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail(f"interrupted{streams.signal_note()}", streams.interrupt_exit_code())
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise  # click reports its own usage errors (exit 2)
        except OSError as exc:
            if streams.is_broken_pipe(exc):
                streams.exit_broken_pipe()
            _fail(_os_error(exc), 2)
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
    from hwtune.cli.db_cmd import db
    from hwtune.cli.model_cmd import model
    from hwtune.cli.plan_cmd import plan
    from hwtune.cli.report_cmd import report
    from hwtune.cli.run_cmd import run
    from hwtune.cli.scan_cmd import scan
    from hwtune.cli.tune_cmd import tune_graph
    cli.add_command(check)
    cli.add_command(compare)
    cli.add_command(import_cmd)
    cli.add_command(db)
    cli.add_command(model)
    cli.add_command(plan)
    cli.add_command(report)
    cli.add_command(run)
    cli.add_command(scan)
    cli.add_command(tune_graph)


# Registering the commands imports the library, and the graph package reads
# the C op tables at import: a library that cannot load (a bad HWTUNE_LIB, a
# broken install) surfaces here, before main() runs. It is reported by main()
# like any other user-facing error instead of escaping as a traceback.
try:
    _register()
    _REGISTER_ERROR = None
except HwtuneError as _exc:
    _REGISTER_ERROR = _exc


def main(args=None, standalone_mode=True):
    """The `hwtune` console command. main(["run", "lstm_small"],
    standalone_mode=False) runs one command inside this process and returns
    its exit code instead of exiting, with the process's signal handlers
    and streams left as they are (the Python API, hwtune.api, returns
    results as objects instead)."""
    if not standalone_mode:
        return _in_process(args)
    try:
        streams.setup()
        if _REGISTER_ERROR is not None:
            raise SystemExit(_report(str(_REGISTER_ERROR), _REGISTER_ERROR.exit_code))
        cli.main(args=args, prog_name="hwtune")
        code = 0
    except SystemExit as exc:
        code = exc.code
    except KeyboardInterrupt:  # before a command started (setup, parsing)
        code = _report(f"interrupted{streams.signal_note()}", streams.interrupt_exit_code())
    except OSError as exc:  # output while parsing arguments: --help, --version
        if streams.is_broken_pipe(exc):
            streams.exit_broken_pipe()
        code = _report(_os_error(exc), 2)
    # Output still buffered (stdout redirected to a file) is written here, so
    # a full disk is reported like any other output error.
    streams.finish(code)


def _in_process(args) -> int:
    if _REGISTER_ERROR is not None:
        return _report(str(_REGISTER_ERROR), _REGISTER_ERROR.exit_code)
    try:
        cli.main(args=list(args) if args is not None else None, prog_name="hwtune")
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        click.echo(str(code), err=True)
        return 1
    return 0


def _report(message: str, code: int) -> int:
    try:
        click.echo(f"error: {message}", err=True)
    except (OSError, ValueError):
        pass
    return code


if __name__ == "__main__":
    main()
