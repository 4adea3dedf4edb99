"""`hwtune model`: validate, expand, generate and summarise model.json files.

Thin layer: hwtune.graph does the work and raises typed errors; this module
turns them into one-line messages and exit codes.
"""

import functools
import inspect
import json
import os
import re
import sys

import click

from hwtune.cli.options import example, json_option, loss_options, parse_overrides
from hwtune.errors import HwtuneError, OutputError

_SIZE = re.compile(r"(?i)\s*(\d+(?:\.\d+)?)\s*(b|kib|mib|gib|tib|k|m|g|t)?\s*")
_UNITS = {None: 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tib": 1 << 40}


def _bytes(ctx, param, value):
    if value is None:
        return None
    m = _SIZE.fullmatch(value)
    if not m:
        raise click.BadParameter(f'"{value}" is not a size (e.g. 1GiB, 512MiB, 1000000)')
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower() or None])




def _typed_errors(fn):
    """Typed library errors become `error: <one line>` and their exit code."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HwtuneError as exc:
            if kwargs.get("as_json"):
                click.echo(json.dumps(_error_json(exc), indent=2))
            else:
                # Every problem, one `error:` line each, as --json lists them.
                lines = exc.lines() if hasattr(exc, "lines") else [str(exc)]
                for line in lines:
                    click.echo(f"error: {line}", err=True)
            sys.exit(exc.exit_code)
    return wrapper


def _error_json(exc):
    problems = getattr(exc, "problems", None)
    out = {"ok": False, "error": str(exc)}
    if problems is not None:
        out["problems"] = [{"location": p.location, "message": p.message} for p in problems]
    return out


def _model_options(fn):
    fn = click.option("--set", "overrides", multiple=True, callback=parse_overrides,
                      metavar="NAME=VALUE",
                      help="Override a declared var (repeatable), e.g. --set seq=5.")(fn)
    fn = click.option("--max-tensor-bytes", callback=_bytes, metavar="SIZE",
                      help="Refuse any tensor above SIZE (default 1GiB).")(fn)
    fn = click.option("--max-total-bytes", callback=_bytes, metavar="SIZE",
                      help="Refuse models whose tensors total above SIZE (default 8GiB).")(fn)
    return fn


def _model_file(fn):
    """FILE (a model.json) and the options that load it."""
    return click.argument("file", type=click.Path(dir_okay=False))(_model_options(fn))


def _limits(max_tensor_bytes, max_total_bytes):
    from hwtune.graph.limits import Limits
    return Limits.from_env(max_tensor_bytes=max_tensor_bytes, max_total_bytes=max_total_bytes)


def _load(path, overrides, max_tensor_bytes, max_total_bytes):
    """A model.json, an ONNX file or a bundled model's name."""
    from hwtune.sources import load_any
    return load_any(path, overrides, None, _limits(max_tensor_bytes, max_total_bytes))[0]


def dumps_graph(doc) -> str:
    from hwtune.graph.model import dump_document
    return dump_document(doc)


def _write(text, output):
    if output in (None, "-"):
        click.echo(text, nl=False)
        return
    try:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise OutputError(f"cannot write {output}: {exc.strerror or exc}") from None


@click.group("model", epilog=example("hwtune model info configs/models/lstm_small.json"))
def model():
    """Validate, expand, generate and summarise model.json graphs (docs/model-format.md)."""


@model.command("validate", epilog=example("hwtune model validate configs/models/resnet18.json"))
@_model_file
@json_option
@_typed_errors
def validate_cmd(file, overrides, max_tensor_bytes, max_total_bytes, as_json):
    """Check FILE and report every problem with its location."""
    graph = _load(file, overrides, max_tensor_bytes, max_total_bytes)
    if as_json:
        click.echo(json.dumps({"ok": True, "name": graph.name, "ops": len(graph.ops)}))
    else:
        click.echo(f"ok: {graph.name}: {len(graph.ops)} ops, {len(graph.params)} params, "
                   f"{len(graph.inputs)} inputs")


@model.command("expand", epilog=example(
    "hwtune model expand configs/models/lstm_small.json --set seq=3 -o small.json"))
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="OUT", help="Write here instead of stdout.")
@_model_options
@_typed_errors
def expand_cmd(file, output, overrides, max_tensor_bytes, max_total_bytes):
    """Write FILE with every repeat/if/${...} expanded: an ordinary model.json."""
    graph = _load(file, overrides, max_tensor_bytes, max_total_bytes)
    doc = graph.to_json()
    if "weights" in doc and output not in (None, "-"):
        # The weights file is named relative to the model: to the new file's.
        import os
        doc["weights"]["file"] = os.path.relpath(
            graph.weights.path, os.path.dirname(os.path.abspath(output)))
    _write(dumps_graph(doc), output)


@model.command("grad", epilog=example(
    "hwtune model grad resnet18 --loss cross_entropy --optimizer sgd -o resnet18.train.json",
    "hwtune model grad lstm_small --loss mse --optimizer adam --hyper lr=0.01 -o lstm.train.json"))
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="OUT", help="Write the training graph here (default: "
              "stdout).")
@click.option("--score", metavar="OUTPUT", default=None,
              help="the one model output the loss reads (default: all of them)")
@loss_options
@_model_options
@json_option
@_typed_errors
def grad_cmd(file, output, score, loss, optimizer, hyper, batch_norm, overrides,
             max_tensor_bytes, max_total_bytes, as_json):
    """Write the training step of FILE: one graph with the forward pass, the
    loss, the backward pass (reverse-mode differentiation) and the parameter
    update. It runs, tunes and reports like any model (docs/training.md)."""
    from hwtune.engine.lower import plan_model
    from hwtune.graph.autodiff import TrainSpec, training_graph
    from hwtune.graph.info import graph_info
    from hwtune.graph.validate import human_bytes
    graph = _load(file, overrides, max_tensor_bytes, max_total_bytes)
    train = training_graph(graph, TrainSpec(loss=loss, optimizer=optimizer, output=score,
                                            hyper=hyper or None, batch_norm=batch_norm))
    doc = train.to_json()
    if "weights" in doc and output not in (None, "-"):
        import os
        doc["weights"]["file"] = os.path.relpath(
            graph.weights.path, os.path.dirname(os.path.abspath(output)))
    fwd, step = graph_info(graph), graph_info(train)
    fwd_plan, step_plan = plan_model(graph), plan_model(train)
    summary = {"model": graph.name, "loss": loss, "optimizer": optimizer,
               "forward": {"ops": fwd.ops, "flops": fwd.flops,
                           "arena_bytes": fwd_plan.arena_bytes},
               "train": {"ops": step.ops, "flops": step.flops,
                         "arena_bytes": step_plan.arena_bytes,
                         "outputs": len(train.outputs)}}
    _write(dumps_graph(doc), output)
    if output in (None, "-"):
        return
    if as_json:
        click.echo(json.dumps(summary, indent=2))
        return
    click.echo(f"{output}: training step of {graph.name} ({loss}, {optimizer})")
    click.echo(f"ops:     {fwd.ops} forward -> {step.ops} in the step")
    click.echo(f"FLOPs:   {fwd.flops / 1e9:.3f} G forward -> {step.flops / 1e9:.3f} G per step")
    click.echo(f"memory:  arena {human_bytes(fwd_plan.arena_bytes)} forward -> "
               f"{human_bytes(step_plan.arena_bytes)} per step (activations kept for the "
               "backward pass included)")


@model.command("info", epilog=example("hwtune model info configs/models/inception_small.json"))
@_model_file
@json_option
@_typed_errors
def info_cmd(file, overrides, max_tensor_bytes, max_total_bytes, as_json):
    """Op counts, FLOPs, memory, depth, width and critical path of FILE; for
    a dynamic model, its vertex function's."""
    from hwtune.dynamic.sources import find_dynamic
    from hwtune.graph.info import graph_info
    from hwtune.graph.validate import human_bytes
    dyn = find_dynamic(file)
    if dyn is not None:
        return _dynamic_info(dyn, overrides, _limits(max_tensor_bytes, max_total_bytes),
                             as_json)
    info = graph_info(_load(file, overrides, max_tensor_bytes, max_total_bytes))
    if as_json:
        click.echo(json.dumps(info.to_json(), indent=2))
        return
    counts = ", ".join(f"{k} {v}" for k, v in info.op_counts.items())
    click.echo(f"model:        {info.name}")
    click.echo(f"ops:          {info.ops} ({counts})")
    click.echo(f"FLOPs:        {info.flops / 1e9:.3f} G")
    click.echo(f"memory:       params {human_bytes(info.param_bytes)}, inputs "
               f"{human_bytes(info.input_bytes)}, activations "
               f"{human_bytes(info.activation_bytes)} (no reuse)")
    click.echo(f"depth:        {info.depth} ops on the longest chain")
    click.echo(f"width:        {info.width} ops on the widest level")
    click.echo(f"critical:     {info.critical_flops / 1e9:.3f} GFLOPs on the heaviest "
               f"chain; parallelism {info.parallelism:.2f}")


def _dynamic_info(path, overrides, limits, as_json):
    """A dynamic model: its vertex function F (one vertex's ops, FLOPs per
    vertex), its states, children and readouts."""
    from hwtune.dynamic.model import load_dynamic
    from hwtune.graph.info import graph_info
    from hwtune.graph.validate import human_bytes
    m = load_dynamic(path, overrides, limits)
    info = graph_info(m.graph)
    doc = {"model": m.name, "kind": "dynamic", "path": path, "input": m.input_kind,
           "input_width": m.input_width, "arity": m.arity,
           "states": [{"name": n, "width": w} for n, w, _ in m.states],
           "readouts": [{"name": r.name, "at": r.at, "outputs": r.outputs}
                        for r in m.readouts],
           "vertex_function": info.to_json()}
    if as_json:
        click.echo(json.dumps(doc, indent=2))
        return
    counts = ", ".join(f"{k} {v}" for k, v in info.op_counts.items())
    click.echo(f"model:        {m.name} (dynamic: a vertex function over input graphs)")
    click.echo(f"input:        {m.input_kind}" + (f", width {m.input_width}"
                                                  if m.input_width else ""))
    click.echo(f"children:     {m.arity if m.arity else 'any number'} per vertex")
    click.echo("states:       " + ", ".join(f"{n} ({w})" for n, w, _ in m.states))
    click.echo("readouts:     " + ", ".join(f"{r.name} at {r.at}" for r in m.readouts))
    click.echo(f"vertex ops:   {info.ops} ({counts})")
    click.echo(f"FLOPs:        {info.flops / 1e6:.3f} M per vertex row")
    click.echo(f"params:       {human_bytes(info.param_bytes)}")
    stem = os.path.basename(path)[:-5]
    click.echo(f"run it:       hwtune model samples {stem} -o s.jsonl; "
               f"hwtune run {stem} --inputs s.jsonl")


@model.group("generate",
             epilog=example("hwtune model generate lstm --hidden 512 --seq 30 -o lstm.json"))
def generate_group():
    """Write the expanded graph of a bundled model family with chosen sizes."""


def _family_command(family, fn):
    def run(output, **sizes):
        sizes = {k: v for k, v in sizes.items() if v is not None}
        try:
            graph = fn(**sizes)
        except HwtuneError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(exc.exit_code)
        _write(dumps_graph(graph.to_json()), output)

    params = [click.Option(["-o", "--output"], metavar="FILE",
                           help="Write here instead of stdout.")]
    for name, p in inspect.signature(fn).parameters.items():
        kind = type(p.default) if p.default is not None else int
        default = "same as --hidden" if p.default is None else p.default
        if kind is int:
            # A size defaulting to >= 1 stays >= 1 (--seq 0 would build a
            # model without steps); one defaulting to 0 (hoist) stays >= 0.
            kind = click.IntRange(min=1 if p.default is None or p.default >= 1 else 0)
        params.append(click.Option([f"--{name.replace('_', '-')}", name], type=kind,
                                   default=None, help=f"default: {default}"))
    doc = " ".join((inspect.getmodule(fn).__doc__ or "").strip().split("\n\n")[0].split())
    return click.Command(family, callback=run, params=params, help=doc,
                         short_help=doc.split(":")[0],
                         epilog=example(f"hwtune model generate {family} -o {family}.json"))


def _register_families():
    from hwtune.graph.generators import FAMILIES
    for family, (fn, _) in FAMILIES.items():
        generate_group.add_command(_family_command(family, fn))


_register_families()


@model.command("list", epilog=example("hwtune model list"))
@json_option
def list_cmd(as_json):
    """The bundled models: `hwtune run NAME` and friends take these names."""
    from hwtune.sources import list_models
    models = list_models()
    if as_json:
        click.echo(json.dumps(models, indent=2))
        return
    width = max(len(m["name"]) for m in models)
    room = max(20, 100 - width - 2)  # one line each; --json has the whole text
    for kind, title in (("static", None),
                        ("dynamic", "dynamic models (vertex functions over input graphs: "
                                    "run and tune-graph take --inputs FILE.jsonl)")):
        rows = [m for m in models if m["kind"] == kind]
        if title and rows:
            click.echo(f"\n{title}:")
        for m in rows:
            text = m["description"]
            text = text if len(text) <= room else text[:room - 3].rstrip() + "..."
            click.echo(f"{m['name']:{width}s}  {text}")


@model.command("export", epilog=example("hwtune model export resnet18 -o resnet18.onnx"))
@click.argument("file")
@click.option("-o", "--output", metavar="OUT.onnx", required=True, help="ONNX file to write.")
@_model_options
@_typed_errors
def export_cmd(file, output, overrides, max_tensor_bytes, max_total_bytes):
    """Write FILE (a model.json or a bundled model's name) as an ONNX graph
    (opset 17) with the same weights, for ONNX Runtime and other tools."""
    from hwtune.graph.validate import human_bytes
    from hwtune.onnx.export import export_onnx
    graph = _load(file, overrides, max_tensor_bytes, max_total_bytes)
    n = export_onnx(graph, output)
    click.echo(f"wrote {output}: {graph.name}, {len(graph.ops)} ops, {human_bytes(n)}")


@model.command("samples", epilog=example(
    "hwtune model samples tree_lstm_childsum -o trees.jsonl --count 256 --seed 1"))
@click.argument("file")
@click.option("-o", "--output", metavar="OUT.jsonl", required=True,
              help="JSON Lines file to write (one input graph a line).")
@click.option("--count", type=int, default=256, show_default=True, metavar="N",
              help="samples to generate")
@click.option("--seed", type=int, default=0, show_default=True, help="generator seed")
@click.option("--set", "overrides", multiple=True, callback=parse_overrides,
              metavar="NAME=VALUE", help="override a declared model var (repeatable)")
def samples_cmd(file, output, count, seed, overrides):
    """Generate seeded input graphs for a dynamic model (a model.json that
    declares "vertex", or a bundled one's name) with the generator its
    "samples" section names: SST-like parse trees, sentences, complete
    binary trees."""
    from hwtune.dynamic.generate import samples, write_jsonl
    from hwtune.dynamic.model import load_dynamic
    from hwtune.dynamic.sources import resolve_dynamic
    model = load_dynamic(resolve_dynamic(file), overrides)
    n = write_jsonl(output, samples(model.samples, count, seed, model.vocab))
    click.echo(f"wrote {output}: {n} samples for {model.name} "
               f"({model.samples.get('generator')}, seed {seed})")
