"""Entry point: `hwtune` command group."""

import click

from hwtune import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hwtune")
def cli():
    """Benchmark and autotune deep-learning graphs on multicore CPUs."""


def main():
    cli()
