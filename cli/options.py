"""Option decorators shared by several commands (one definition each)."""

from __future__ import annotations

import click


def example(*commands: str) -> str:
    """Epilog for a command's help: it ends with runnable examples."""
    head = "Example:" if len(commands) == 1 else "Examples:"
    return "\b\n" + head + "".join(f"\n  {c}" for c in commands)


def db_option(f):
    return click.option(
        "--db", "db_path", type=click.Path(dir_okay=False), default=None, metavar="PATH",
        help="results database (default: $HWTUNE_DB, else the nearest results.db from "
             "here up, else ~/.local/share/hwtune/results.db)")(f)


def json_option(f):
    return click.option(
        "--json", "as_json", is_flag=True,
        help="print machine-readable JSON on stdout (progress and warnings go to stderr)")(f)


def threads_option(f):
    return click.option(
        "--threads", "threads", default=None, metavar="LIST",
        help="thread counts to measure, e.g. 1,2,4 or 1-8 (default: 1..N usable CPUs)")(f)


def isa_option(f):
    return click.option(
        "--isa", default=None, metavar="NAME",
        help="kernel variant: generic, avx2 or avx512 (default: best the CPU supports)")(f)


def reps_option(f):
    return click.option(
        "--reps", type=int, default=None, metavar="N",
        help="samples per measurement (default: 21, 9 with --quick)")(f)


def parse_overrides(ctx, param, values):
    """click callback for repeatable --set NAME=VALUE: VALUE is JSON when it
    parses as JSON, else a bare string (such as a tensor name)."""
    import json
    out = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f'"{item}" is not NAME=VALUE')
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


class _SchedulerOption(click.Option):
    """--scheduler: its help lists the engine's scheduler table, read from
    the library when help is shown (not at import: the CLI starts without
    loading it)."""

    def get_help_record(self, ctx):
        from hwtune.errors import NativeError
        try:
            from hwtune.native import sched
            table = sched.schedulers()
            many = sched.default(many_executors=True).name
            self.help = (f"{', '.join(table)} (default: stored config, else "
                         f"{sched.default().name}; {many} when K > 1)")
        except NativeError:
            pass  # keep the generic text; running a command reports the library problem
        return super().get_help_record(ctx)


def model_args(model: str, overrides=None, shapes=None) -> str:
    """MODEL and its --set/--shape flags as the user would type them again
    (for a "next:" line naming the command to run)."""
    import json
    import shlex
    parts = [model]
    for k, v in (overrides or {}).items():
        parts += ["--set", f"{k}={v if isinstance(v, str) else json.dumps(v)}"]
    for k, dims in (shapes or {}).items():
        parts += ["--shape", f"{k}={'x'.join(str(d) for d in dims)}"]
    return " ".join(shlex.quote(p) for p in parts)


def echo_next(text: str) -> None:
    """The one "next:" line a long command ends with: what to run now."""
    click.echo(f"next: {text}")


def set_option(f):
    """--set for commands that take a model.json or an ONNX model."""
    return click.option(
        "--set", "overrides", multiple=True, callback=parse_overrides, metavar="NAME=VALUE",
        help="override a declared model var (repeatable), e.g. --set seq=5; for an "
             "ONNX model, size a symbolic dimension, e.g. --set batch=1")(f)


def scheduler_option(f):
    return click.option(
        "--scheduler", default=None, metavar="NAME", cls=_SchedulerOption,
        help="a scheduler of the engine's table (default: stored config)")(f)


def parse_shapes(ctx, param, values):
    """click callback for repeatable --shape NAME=D0xD1x...: input shapes of
    an ONNX model."""
    from hwtune.errors import UsageError
    from hwtune.sources import parse_shape
    out = {}
    for item in values:
        try:
            name, shape = parse_shape(item)
        except UsageError as exc:
            raise click.BadParameter(str(exc).replace("invalid --shape ", "")) from None
        out[name] = shape
    return out


def shape_option(f):
    return click.option(
        "--shape", "shapes", multiple=True, callback=parse_shapes, metavar="NAME=DIMS",
        help="ONNX models: the shape of an input, e.g. --shape x=1x3x224x224 (repeatable); "
             "or size a symbolic dimension with --set NAME=N")(f)


def _hyper(ctx, param, values):
    out = {}
    for item in values or ():
        key, sep, val = item.partition("=")
        try:
            out[key.strip()] = float(val)
        except ValueError:
            sep = ""
        if not sep or not key.strip():
            raise click.BadParameter(f'"{item}" is not NAME=NUMBER (e.g. lr=0.05)')
    return out


def loss_options(f):
    """--loss, --optimizer and --hyper: what a training step computes."""
    from hwtune.graph.autodiff import BATCH_NORM_MODES, LOSSES, OPTIMIZERS
    f = click.option("--batch-norm", "batch_norm", type=click.Choice(BATCH_NORM_MODES),
                     default="batch", show_default=True,
                     help="batch_norm statistics in the step: batch (PyTorch's model.train(); "
                          "the running ones updated) or running (the model's, fixed)")(f)
    f = click.option("--hyper", multiple=True, callback=_hyper, metavar="NAME=NUMBER",
                     help="optimizer setting (repeatable): lr, momentum, weight_decay (sgd); "
                          "lr, beta1, beta2, epsilon (adam)")(f)
    f = click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="sgd",
                     show_default=True,
                     help="parameter update; none outputs each <param>.grad instead")(f)
    return click.option("--loss", type=click.Choice(LOSSES), default="cross_entropy",
                        show_default=True,
                        help="cross_entropy (on the logits of a final softmax) or mse, "
                             "summed over the model's outputs")(f)


def train_options(f):
    """--train (with the loss options): run or tune the training step."""
    f = loss_options(f)
    return click.option("--train", is_flag=True,
                        help="use the model's training step (forward, loss, backward, "
                             "update: `hwtune model grad`) instead of its forward pass")(f)


def train_record(train: bool, loss: str, optimizer: str, hyper, batch_norm: str):
    """What a run records of --train (the report pairs the step with the
    model's forward pass by it): None for a forward pass."""
    if not train:
        return None
    return {"loss": loss, "optimizer": optimizer, "hyper": hyper or None,
            "batch_norm": batch_norm}


def training_step(graph, loss: str, optimizer: str, hyper, batch_norm: str):
    from hwtune.graph.autodiff import TrainSpec, training_graph
    return training_graph(graph, TrainSpec(loss=loss, optimizer=optimizer, hyper=hyper or None,
                                           batch_norm=batch_norm))


class AliasedOption(click.Option):
    """An option whose names after the first are old spellings kept working
    (hwtune run --iterations): --help shows the first only."""

    def get_help_record(self, ctx):
        opts = self.opts
        self.opts = opts[:1]
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = opts


def min_time_option(f):
    return click.option(
        "--min-time", "min_time", type=click.FloatRange(0, 3600, min_open=True), default=None,
        metavar="S",
        help="measure for at least S seconds: more samples than --reps when they are short "
             "(as hyperfine's --min-runs/--runs, for tiny models)")(f)
