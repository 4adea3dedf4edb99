"""Every validation problem with its exact message and location."""

import copy
import json

import pytest

from hwtune.errors import UsageError
from hwtune.graph import GraphError, Limits, load_model

BASE = {
    "name": "t",
    "inputs": [{"name": "x", "shape": [2, 4]}],
    "params": [{"name": "W", "shape": [4, 3]}],
    "ops": [
        {"name": "y", "op": "matmul", "inputs": ["x", "W"]},
        {"name": "z", "op": "relu", "inputs": ["y"]},
    ],
    "outputs": ["z"],
}


def model(edit=None):
    doc = copy.deepcopy(BASE)
    if edit:
        edit(doc)
    return doc


def problems(doc, **kw):
    with pytest.raises(GraphError) as err:
        load_model(doc, **kw)
    return err.value, [str(p) for p in err.value.problems]


def test_base_model_is_valid_and_shapes_are_inferred():
    g = load_model(model())
    assert g.shapes["y"] == (2, 3) and g.shapes["z"] == (2, 3)
    assert [g.ops[i].name for i in g.order] == ["y", "z"]


def test_graph_error_is_a_usage_error():
    err, _ = problems(model(lambda d: d["ops"][1].update(op="rellu")))
    assert isinstance(err, UsageError) and err.exit_code == 2


def test_unknown_op_suggests_the_closest():
    err, probs = problems(model(lambda d: d["ops"][1].update(op="rellu")))
    assert probs == ['ops[1].op: unknown op "rellu" (did you mean "relu"?)']
    assert str(err) == probs[0]


def test_unknown_tensor():
    _, probs = problems(model(lambda d: d["ops"][1].update(inputs=["h3"])))
    assert probs == ['ops[1].inputs[0]: unknown tensor "h3"']


def test_unknown_output_tensor():
    _, probs = problems(model(lambda d: d.update(outputs=["z", "zz"])))
    assert probs == ['outputs[1]: unknown tensor "zz" (did you mean "z"?)']


def test_no_outputs():
    _, probs = problems(model(lambda d: d.update(outputs=[])))
    assert probs == ["outputs: the model declares no outputs"]


def test_duplicate_tensor_between_inputs_and_params():
    _, probs = problems(model(lambda d: d["params"].append({"name": "x", "shape": [1]})))
    assert probs == ['params[1].name: duplicate tensor name "x" (first defined at inputs[0])']


def test_duplicate_op_and_output_names():
    def edit(d):
        d["ops"].append({"name": "y", "op": "relu", "inputs": ["z"]})
    err, probs = problems(model(edit))
    assert probs == ['ops[2].name: duplicate op name "y" (first at ops[0])',
                     'ops[2].outputs[0]: duplicate tensor name "y" (first defined at '
                     'ops[0].outputs[0])']
    assert str(err) == probs[0] + " (+1 more)"


def test_cycle_is_reported_with_its_op_names():
    def edit(d):
        d["ops"] = [
            {"name": "a", "op": "add", "inputs": ["x", "c"]},
            {"name": "b", "op": "relu", "inputs": ["a"]},
            {"name": "c", "op": "relu", "inputs": ["b"]},
            {"name": "z", "op": "relu", "inputs": ["c"]},
        ]
        d["params"] = []
    _, probs = problems(model(edit))
    assert probs == ["ops[0]: cycle: a -> b -> c -> a"]


def test_self_loop_is_a_cycle():
    _, probs = problems(model(lambda d: d["ops"][1].update(inputs=["z"])))
    assert probs == ["ops[1]: cycle: z -> z"]


def test_shape_mismatch():
    _, probs = problems(model(lambda d: d["params"][0].update(shape=[5, 3])))
    assert probs == ["ops[0].inputs[1]: inner dimensions differ: A [2, 4] gives K=4, "
                     "B [5, 3] gives K=5"]


def test_downstream_of_a_broken_op_is_not_reported_again():
    def edit(d):
        d["params"][0]["shape"] = [5, 3]
        d["ops"].append({"name": "w", "op": "add", "inputs": ["z", "x"]})
        d["outputs"] = ["w"]
    _, probs = problems(model(edit))
    assert len(probs) == 1 and probs[0].startswith("ops[0].inputs[1]")


def test_bad_attribute_type_and_unknown_attribute():
    def edit(d):
        d["ops"][0]["attrs"] = {"transpose_a": 1}
        d["ops"][1]["attrs"] = {"alpha": 0.1}
    err, probs = problems(model(edit))
    assert probs == ["ops[0].attrs.transpose_a: must be true or false, got 1",
                     'ops[1].attrs.alpha: unknown attribute "alpha" for relu (known: none)']
    assert err.problems[1].location == "ops[1].attrs.alpha"


def test_missing_required_attribute():
    def edit(d):
        d["ops"][1] = {"name": "z", "op": "softmax", "inputs": ["y"], "attrs": {"axis": 5}}
    _, probs = problems(model(edit))
    assert probs == ["ops[1].attrs.axis: axis 5 is out of range for rank 2"]


def test_wrong_arity_and_output_count():
    def edit(d):
        d["ops"][1]["inputs"] = ["y", "y"]
        d["ops"].append({"name": "s", "op": "sigmoid", "inputs": ["z"], "outputs": ["a", "b"]})
    _, probs = problems(model(edit))
    assert probs == ["ops[1].inputs: relu takes 1 input (x), got 2",
                     "ops[2].outputs: sigmoid produces 1 output(s), got 2 names"]


def test_absurd_sizes_are_refused_before_allocation():
    err, probs = problems(model(lambda d: d["inputs"][0].update(shape=[100000, 100000])))
    assert probs[0] == ('inputs[0].shape: tensor "x" [100000, 100000] needs 37.3 GiB, more '
                        "than the 1.0 GiB limit (raise it with --max-tensor-bytes or HWTUNE_MAX_TENSOR_BYTES=SIZE)")
    assert probs[-1].startswith("model: all tensors together need")
    assert "(+" in str(err)


def test_limits_are_configurable():
    small = Limits(max_tensor_bytes=16, max_total_bytes=1 << 20)
    _, probs = problems(model(), limits=small)
    assert probs[0] == ('inputs[0].shape: tensor "x" [2, 4] needs 32 B, more than the 16 B '
                        "limit (raise it with --max-tensor-bytes or HWTUNE_MAX_TENSOR_BYTES=SIZE)")
    _, probs = problems(model(), limits=Limits(max_total_bytes=64))
    assert probs == ["model: all tensors together need 128 B, more than the 64 B limit "
                     "(raise it with --max-total-bytes or HWTUNE_MAX_TOTAL_BYTES=SIZE)"]


def test_malformed_json_reports_line_and_column(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"name": "x",\n "inputs": [\n  {"name": "a" "shape": [1]}]}\n')
    with pytest.raises(GraphError) as err:
        load_model(str(path))
    assert str(err.value) == f"{path}:3:16: malformed JSON: Expecting ',' delimiter"
    assert err.value.problems[0].location == "3:16"


def test_structural_problems_are_all_collected():
    def edit(d):
        d["inputs"][0]["shape"] = [2, 0]
        d["params"][0]["dtype"] = "float16"
        d["ops"][0]["colour"] = "red"
        d["ops"][1].pop("name")
        d["extra"] = 1
    _, probs = problems(model(edit))
    assert probs == ['extra: unknown key "extra"',
                     "inputs[0].shape: dimensions must be >= 1, got [2, 0]",
                     'params[0].dtype: unsupported dtype "float16" (supported: float32, int64, bool)',
                     'ops[0].colour: unknown key "colour"',
                     "ops[1].name: missing or empty name"]


def test_param_init_checks():
    def edit(d):
        d["params"][0].update(init="constant")
    _, probs = problems(model(edit))
    assert probs == ['params[0].init: init "constant" needs "value"']
    _, probs = problems(model(lambda d: d["params"][0].update(init="xavier")))
    assert probs == ['params[0].init: unknown init "xavier" (one of: uniform, normal, zeros, '
                     "ones, constant, file)"]
    _, probs = problems(model(lambda d: d["params"][0].update(low=1)))
    assert probs == ['params[0].init: "low" and "high" go together']


def test_problems_inside_repeats_point_back_to_the_template():
    def edit(d):
        d["ops"] = [
            {"name": "y", "op": "matmul", "inputs": ["x", "W"]},
            {"repeat": {"var": "t", "range": [1, 4]}, "body": [
                {"name": "z${t}", "op": "relu", "inputs": ["${'y' if t == 1 else 'zz' + (t - 1)}"]},
            ]},
        ]
        d["outputs"] = ["z3"]
    _, probs = problems(model(edit))
    assert probs == ['ops[2].inputs[0] (from ops[1].body[0], t=2): unknown tensor "zz1" '
                     '(did you mean "z1"?)',
                     'ops[3].inputs[0] (from ops[1].body[0], t=3): unknown tensor "zz2" '
                     '(did you mean "z2"?)']


def test_problems_of_a_file_start_with_its_path(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(model(lambda d: d["ops"][1].update(op="rellu"))))
    with pytest.raises(GraphError) as err:
        load_model(str(path))
    assert str(err.value) == f'{path}: ops[1].op: unknown op "rellu" (did you mean "relu"?)'
