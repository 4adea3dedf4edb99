"""`hwtune import`: an ONNX file -> model.json + weights (hwtune.onnx)."""

from __future__ import annotations

import json
import os

import click

from hwtune.cli.options import example, json_option, parse_overrides, shape_option


@click.command("import", epilog=example(
    "hwtune import resnet.onnx --shape input=1x3x224x224 -o resnet.json"))
@click.argument("source", type=click.Path(dir_okay=False))
@click.option("-o", "--output", metavar="OUT.json", default=None,
              help="model.json to write (default: SOURCE with .json); the weights go "
                   "beside it as OUT.weights.safetensors")
@shape_option
@click.option("--set", "overrides", multiple=True, callback=parse_overrides, metavar="NAME=N",
              help="size a symbolic dimension of the inputs, e.g. --set batch=1 (repeatable)")
@json_option
def import_cmd(source, output, shapes, overrides, as_json):
    """Import SOURCE (an ONNX file) as a model.json with its real weights.

    Shape-only subgraphs (Shape, Gather, Cast, Constant, Unsqueeze, Concat,
    ...) are folded at import; each other node becomes model.json ops (see
    docs/onnx.md for the table). Symbolic input dimensions need --shape or
    --set. `hwtune run`, `tune-graph` and `compare` also take SOURCE directly
    (imported on the fly and cached by content).
    """
    from hwtune.graph.validate import human_bytes
    from hwtune.onnx.importer import import_onnx

    if output is None:
        base = source[:-5] if source.lower().endswith(".onnx") else source
        output = base + ".json"
    s = import_onnx(source, output, shapes, overrides)
    if as_json:
        click.echo(json.dumps(s.to_json(), indent=2))
        return
    shapes_text = ", ".join(f"{n} {list(v)}" for n, v in s.inputs.items())
    outs_text = ", ".join(f"{n} {list(v)}" for n, v in s.outputs.items())
    click.echo(f"model:    {s.name} from {os.path.basename(source)} (ONNX opset {s.opset}"
               f"{', ' + s.producer if s.producer else ''})")
    click.echo(f"nodes:    {s.nodes} ONNX nodes -> {s.ops} ops ({s.folded} folded at import)")
    click.echo(f"inputs:   {shapes_text}")
    click.echo(f"outputs:  {outs_text}")
    click.echo(f"weights:  {s.params} tensors, {human_bytes(s.param_bytes)} -> {s.weights}")
    click.echo(f"wrote:    {s.model}")
