"""The JSON Schema of model.json, generated from the op registry.

configs/model.schema.json is this function's output (a test keeps them
equal), so editors can validate model files without hwtune installed.  The
schema accepts both compact files (vars, ${...}, repeat/if) and expanded
ones; shape, graph and cross-reference checks need `hwtune model validate`.
"""

import json

from hwtune.graph import ops as oplib
from hwtune.graph.model import DTYPES, INIT_KINDS

_EXPR = {"type": "string", "pattern": r"^\$\{[^{}]*\}$"}


def _or_expr(schema):
    return {"anyOf": [schema, {"$ref": "#/$defs/expr"}]}


def _directive(item_ref):
    """repeat / if objects whose body holds items of the same kind."""
    body = {"type": "array", "items": {"$ref": item_ref}}
    return {"oneOf": [
        {"type": "object", "required": ["repeat", "body"], "additionalProperties": False,
         "properties": {
             "repeat": {"type": "object", "required": ["var"], "additionalProperties": False,
                        "properties": {
                            "var": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"},
                            "range": {"anyOf": [
                                {"type": "array", "minItems": 2, "maxItems": 3,
                                 "items": _or_expr({"type": "integer"})},
                                {"$ref": "#/$defs/expr"}]},
                            "in": {"anyOf": [{"type": "array"}, {"$ref": "#/$defs/expr"}]}},
                        "oneOf": [{"required": ["range"]}, {"required": ["in"]}]},
             "body": body, "comment": {"type": "string"}}},
        {"type": "object", "required": ["if", "body"], "additionalProperties": False,
         "properties": {"if": {}, "body": body, "comment": {"type": "string"}}},
    ]}


def _attr_schema(attr):
    kinds = {
        "bool": {"type": "boolean"},
        "int": {"type": "integer"},
        "float": {"type": "number"},
        "str": {"type": "string"},
        "layout": {"type": "string", "pattern": r"^(NCHW([0-9]+c)?|OIHW([0-9]+i[0-9]+o)?)$"},
        "pair": {"anyOf": [{"type": "integer"},
                           {"type": "array", "minItems": 2, "maxItems": 2,
                            "items": _or_expr({"type": "integer"})}]},
        "ints": {"type": "array", "items": _or_expr({"type": "integer"})},
    }
    schema = dict(kinds[attr.kind])
    if attr.choices is not None:
        schema = {"enum": list(attr.choices)}
    if attr.doc:
        schema["description"] = attr.doc
    out = _or_expr(schema)
    if attr.default is None:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


def _op_rules():
    """One if/then per op: its attribute names, kinds and required ones."""
    rules = []
    for name, spec in sorted(oplib.REGISTRY.items()):
        attrs = {a.name: _attr_schema(a) for a in spec.attrs}
        required = [a.name for a in spec.attrs if a.default is oplib.REQUIRED]
        then = {"properties": {"attrs": {"type": "object", "properties": attrs,
                                         "additionalProperties": False}}}
        if required:
            then["required"] = ["attrs"]
            then["properties"]["attrs"]["required"] = required
        rules.append({"if": {"properties": {"op": {"const": name}}, "required": ["op"]},
                      "then": then})
    return rules


def _vertex_schema():
    """A dynamic model's vertex function: the roles of F's inputs
    (docs/model-format.md, "Dynamic models")."""
    name = {"type": "string", "minLength": 1}
    width = {"anyOf": [{"type": "integer", "minimum": 1}, {"$ref": "#/$defs/expr"}]}

    def obj(required, props):
        props = dict(props, comment={"type": "string"})
        return {"type": "object", "required": required, "additionalProperties": False,
                "properties": props}

    return {
        "type": "object", "required": ["states"], "additionalProperties": False,
        "description": "The vertex function of a dynamic model: the model's ops are F's and "
                       "the readouts'; its inputs and outputs are derived from these roles.",
        "properties": {
            "input": {"oneOf": [obj(["name", "tokens"], {"name": name, "tokens": name}),
                                obj(["name", "features"], {"name": name, "features": width})]},
            "arity": {"anyOf": [{"type": "integer", "minimum": 0}, {"$ref": "#/$defs/expr"}]},
            "states": {"type": "array", "minItems": 1, "items": obj(
                ["name", "width", "update"], {"name": name, "width": width, "update": name})},
            "children": {"type": "array", "items": {"oneOf": [
                obj(["name", "state", "child"], {"name": name, "state": name,
                                                 "child": {"type": "integer", "minimum": 0}}),
                obj(["name", "state", "reduce"], {"name": name, "state": name,
                                                  "reduce": {"enum": ["sum", "each"]}})]}},
            "edges": {"type": "array", "items": {"oneOf": [
                obj(["name", "width", "to_edges"], {"name": name, "width": width,
                                                    "to_edges": name}),
                obj(["name", "width", "sum_edges"], {"name": name, "width": width,
                                                     "sum_edges": name})]}},
            "readouts": {"type": "array", "items": obj(["name", "reads", "outputs"], {
                "name": name, "at": {"enum": ["root", "every", "last"]},
                "reads": {"type": "object", "additionalProperties": name},
                "outputs": {"type": "array", "minItems": 1, "items": name}})},
            "comment": {"type": "string"},
        },
    }


def build_schema():
    names = {"type": "array", "items": {"$ref": "#/$defs/name_item"}}
    number = _or_expr({"type": "number"})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://hwtune.dev/model.schema.json",
        "title": "hwtune model.json",
        "description": "A computation graph for hwtune; see docs/model-format.md.",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "format_version": {"const": 1},
            "name": {"type": "string"},
            "description": {"type": "string"},
            "comment": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0},
            "extends": {"type": "string"},
            "vars": {"type": "object",
                     "propertyNames": {"pattern": r"^[A-Za-z_][A-Za-z0-9_]*$"}},
            "inputs": {"type": "array", "items": {"$ref": "#/$defs/tensor_item"}},
            "params": {"type": "array", "items": {"$ref": "#/$defs/tensor_item"}},
            "ops": {"type": "array", "items": {"$ref": "#/$defs/op_item"}},
            "outputs": names,
            "weights": {
                "type": "object", "required": ["file"], "additionalProperties": False,
                "description": "Sidecar file (safetensors layout, float32) holding the "
                               "values of every tensor with \"init\": \"file\"; path "
                               "relative to this file, sha256 of its content.",
                "properties": {
                    "file": {"type": "string", "minLength": 1},
                    "sha256": {"type": "string", "pattern": "^[0-9a-fA-F]{64}$"},
                    "comment": {"type": "string"},
                }},
            "vertex": {"$ref": "#/$defs/vertex"},
            "samples": {
                "type": "object", "required": ["generator"],
                "description": "A dynamic model's seeded input-graph generator "
                               "(hwtune model samples).",
                "properties": {
                    "generator": {"enum": ["sst-tree", "sentence", "complete-tree",
                                           "random-dag"]},
                    "comment": {"type": "string"},
                }},
        },
        "$defs": {
            "vertex": _vertex_schema(),
            "expr": _EXPR,
            "name_item": {"anyOf": [{"type": "string", "minLength": 1},
                                    _directive("#/$defs/name_item")]},
            "tensor_item": {"anyOf": [{"$ref": "#/$defs/tensor"},
                                      _directive("#/$defs/tensor_item")]},
            "op_item": {"anyOf": [{"$ref": "#/$defs/op"}, _directive("#/$defs/op_item")]},
            "tensor": {
                "type": "object", "required": ["name", "shape"], "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "shape": {"type": "array", "items": {"anyOf": [
                        {"type": "integer", "minimum": 1}, {"$ref": "#/$defs/expr"},
                        _directive("#/$defs/tensor/properties/shape/items")]}},
                    "dtype": {"enum": list(DTYPES)},
                    "init": _or_expr({"enum": list(INIT_KINDS)}),
                    "scale": number, "low": number, "high": number, "value": number,
                    "data": {"type": "array"},
                    "comment": {"type": "string"},
                },
            },
            "op": {
                "type": "object", "required": ["name", "op"], "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "op": {"enum": sorted(oplib.REGISTRY)},
                    "inputs": names,
                    "outputs": names,
                    "attrs": {"type": "object"},
                    "comment": {"type": "string"},
                },
                "allOf": _op_rules(),
            },
        },
    }


def schema_text() -> str:
    return json.dumps(build_schema(), indent=2) + "\n"
