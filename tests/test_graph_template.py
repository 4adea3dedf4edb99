"""The compact constructs: vars, ${...}, repeat (range / in), if, extends."""

import json

import pytest

from hwtune.graph import GraphError, load_model
from hwtune.graph import template


def chain(n_var="n", extra_vars=None):
    """x -> relu -> relu ... (n times), written with one repeat."""
    return {
        "vars": {"n": 3, "width": 4, **(extra_vars or {})},
        "inputs": [{"name": "r0", "shape": [2, "${width}"]}],
        "ops": [{"repeat": {"var": "i", "range": [1, "${%s + 1}" % n_var]}, "body": [
            {"name": "r${i}", "op": "relu", "inputs": ["r${i - 1}"]}]}],
        "outputs": ["r${n}"],
    }


def test_repeat_expands_with_substitution_and_typed_values():
    g = load_model(chain())
    assert [(o.name, o.inputs) for o in g.ops] == [("r1", ["r0"]), ("r2", ["r1"]), ("r3", ["r2"])]
    assert g.inputs[0].shape == (2, 4)  # "${width}" became the integer 4
    assert g.outputs == ["r3"]


def test_overrides_replace_vars_and_unknown_ones_are_refused():
    g = load_model(chain(), overrides={"n": 5, "width": 7})
    assert len(g.ops) == 5 and g.shapes["r5"] == (2, 7)
    with pytest.raises(GraphError) as err:
        load_model(chain(), overrides={"widht": 3})
    assert str(err.value) == 'vars.widht: unknown variable "widht" (the model declares: n, width)'


def test_vars_may_use_earlier_vars():
    doc = chain(extra_vars={"m": "${n * 2}"})
    doc["outputs"] = ["r${m // 2}"]
    assert load_model(doc, overrides={"n": 4}).outputs == ["r4"]


def test_nested_repeat_with_step_and_origin():
    items = template.expand_list(
        [{"repeat": {"var": "l", "range": [0, 2]}, "body": [
            {"repeat": {"var": "t", "range": [10, 0, -5]}, "body": ["L${l}.${t}"]}]}],
        {}, "ops", template.new_counter())
    assert [v for v, _ in items] == ["L0.10", "L0.5", "L1.10", "L1.5"]
    assert template.origin_text(items[3][1]) == "ops[0].body[0].body[0], l=1, t=5"


def test_repeat_over_records_and_if():
    env = {"mods": [{"name": "a", "c": 2, "down": 1}, {"name": "b", "c": 3, "down": 0}]}
    items = template.expand_list(
        [{"repeat": {"var": "m", "in": "${mods}"}, "body": [
            "${m.name}:${m.c * 10}",
            {"if": "${m.down}", "body": ["${m.name}.proj"]}]}],
        env, "x", template.new_counter())
    assert [v for v, _ in items] == ["a:20", "a.proj", "b:30"]


def test_repeat_inside_an_op_input_list():
    doc = chain()
    doc["ops"].append({"name": "s", "op": "sum", "inputs": [
        {"repeat": {"var": "i", "range": [1, "${n + 1}"]}, "body": ["r${i}"]}]})
    doc["outputs"] = ["s"]
    g = load_model(doc)
    assert g.ops[-1].inputs == ["r1", "r2", "r3"]


@pytest.mark.parametrize("text,value", [
    ("${2 + 3 * 4}", 14), ("${(2 + 3) * 4}", 20), ("${7 // 2}", 3), ("${7 % 4}", 3),
    ("${2 ** 10}", 1024), ("${-n}", -3), ("${8 / 2}", 4), ("${3 / 2}", 1.5),
    ("${'a' if n > 2 else 'b'}", "a"), ("${n == 3 and not 0}", True),
    ("${1 < n <= 3}", True), ("${'L' + n}", "L3"), ("x${n}y${n + 1}", "x3y4"),
    ("plain", "plain"),
])
def test_expressions(text, value):
    assert template.substitute(text, {"n": 3}, "here") == value


@pytest.mark.parametrize("text,message", [
    ("${n +}", 'here: bad expression "${n +}"'),
    ("${m}", 'here: cannot evaluate "${m}": unknown variable "m"'),
    ("${n / 0}", 'here: cannot evaluate "${n / 0}": division by zero'),
    ("${open('x')}", """here: cannot evaluate "${open('x')}": unsupported syntax"""),
    ("${n.c}", 'here: cannot evaluate "${n.c}": no field "c"'),
    ("${'a' - 1}", """here: cannot evaluate "${'a' - 1}": arithmetic on a string"""),
    ("${2 ** 100000}", 'here: cannot evaluate "${2 ** 100000}": exponent too large'),
    ("${(10 ** 60) ** 2}", 'here: cannot evaluate "${(10 ** 60) ** 2}": number too large'),
])
def test_expression_errors(text, message):
    with pytest.raises(GraphError) as err:
        template.substitute(text, {"n": 3}, "here")
    assert str(err.value) == message


def test_expression_errors_are_located_in_the_file():
    doc = chain()
    doc["ops"][0]["body"][0]["inputs"] = ["r${i - }"]
    with pytest.raises(GraphError) as err:
        load_model(doc)
    assert str(err.value) == 'ops[0].body[0].inputs[0]: bad expression "${i - }"'


def test_directive_errors():
    def expand(items):
        template.expand_list(items, {}, "ops", template.new_counter())

    with pytest.raises(GraphError, match=r'ops\[0\].repeat: repeat needs exactly one of '
                                         r'"range" or "in"'):
        expand([{"repeat": {"var": "t"}, "body": []}])
    with pytest.raises(GraphError, match=r"ops\[0\].repeat.range: must be \[start, stop\] or "
                                         r"\[start, stop, step\] integers, got \['a', 2\]"):
        expand([{"repeat": {"var": "t", "range": ["a", 2]}, "body": []}])
    with pytest.raises(GraphError, match=r'ops\[0\]: unknown key "times" in directive'):
        expand([{"repeat": {"var": "t", "range": [0, 1]}, "times": 2, "body": []}])
    with pytest.raises(GraphError, match=r'ops\[0\]: "repeat"/"if" directive needs a "body"'):
        expand([{"repeat": {"var": "t", "range": [0, 1]}, "ops": []}])
    with pytest.raises(GraphError, match=r'ops\[0\].repeat.var: "2t" is not a valid variable'):
        expand([{"repeat": {"var": "2t", "range": [0, 1]}, "body": []}])


def test_runaway_expansion_is_refused():
    with pytest.raises(GraphError) as err:
        load_model(chain(), overrides={"n": 5_000_000})
    assert str(err.value) == ("ops[0].repeat.range: 5000000 iterations is more than 1000000 "
                              "(raise it with HWTUNE_MAX_EXPANDED_ITEMS=N)")
    nested = {"repeat": {"var": "a", "range": [0, 2000]}, "body": [
        {"repeat": {"var": "b", "range": [0, 2000]}, "body": ["x"]}]}
    with pytest.raises(GraphError, match="expansion produces more than 1000000 items"):
        template.expand_list([nested], {}, "ops", template.new_counter())


def test_expanded_graph_is_ordinary_and_reloads_identically():
    g = load_model(chain(), overrides={"n": 4})
    doc = g.to_json()
    text = json.dumps(doc)
    assert "${" not in text and "repeat" not in text and "vars" not in doc
    again = load_model(json.loads(text))
    assert again.to_json() == doc


def test_extends_merges_vars_and_replaces_other_keys(tmp_path):
    (tmp_path / "base.json").write_text(json.dumps(chain()))
    (tmp_path / "child.json").write_text(json.dumps(
        {"extends": "base.json", "name": "child", "vars": {"n": 2}}))
    g = load_model(str(tmp_path / "child.json"))
    assert g.name == "child" and len(g.ops) == 2 and g.shapes["r2"] == (2, 4)


def test_extends_loop_is_refused(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps({"extends": "b.json"}))
    (tmp_path / "b.json").write_text(json.dumps({"extends": "a.json"}))
    with pytest.raises(GraphError, match="more than 8 nested extends"):
        load_model(str(tmp_path / "a.json"))


def test_missing_file():
    with pytest.raises(GraphError, match="cannot read /nonexistent/m.json: No such file"):
        load_model("/nonexistent/m.json")
