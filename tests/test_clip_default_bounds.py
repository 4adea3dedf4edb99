"""A clip with one bound (the other at its default, infinite) runs: the
lowered graph that results.db stores spells the infinite bound as 1e999,
which Python and the C runner both read back as infinity (before: the run
failed with "Out of range float values are not JSON compliant")."""

import json
import math

import numpy as np
import pytest

from hwtune.db.keys import canonical_json


def test_canonical_json_round_trips_infinities_and_refuses_nan():
    doc = {"b": [1.5, -math.inf], "a": {"max": math.inf}, "s": "inf"}
    text = canonical_json(doc)
    assert text == '{"a":{"max":1e999},"b":[1.5,-1e999],"s":"inf"}'
    assert json.loads(text) == doc
    assert canonical_json({"x": [1.0, 2]}) == '{"x":[1.0,2]}'  # finite: spelled as before
    with pytest.raises(ValueError):
        canonical_json({"x": math.nan})


@pytest.mark.parametrize("attrs", [{"max": 1.0}, {"min": -0.5}, {}])
def test_run_clip_with_a_default_bound(attrs, tmp_path):
    from conftest import invoke
    doc = {"format_version": 1, "name": "clip1", "seed": 0,
           "inputs": [{"name": "x", "shape": [4, 8]}], "params": [],
           "ops": [{"name": "c", "op": "clip", "inputs": ["x"], "attrs": attrs}],
           "outputs": ["c"]}
    model = tmp_path / "m.json"
    model.write_text(json.dumps(doc))
    x = np.random.default_rng(0).uniform(-3, 3, (4, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    r = invoke("run", model, "--db", tmp_path / "r.db", "--reps", 2,
               "--input", f"x={tmp_path / 'x.npy'}", "--save-outputs", out)
    assert r.exit_code == 0, r.output
    got = np.load(out)["c"]
    want = np.clip(x, attrs.get("min", -np.inf), attrs.get("max", np.inf))
    np.testing.assert_array_equal(got, want)
