"""GoogLeNet-style inception network (Graphi Table 1c): the same graph as
configs/models/templates/inception.json, written as a loop.

Input channels of each module are derived here from the previous module's
outputs (the template lists them), so the two cross-check each other.
"""

from hwtune.graph.generators.builder import Builder

# GoogLeNet Table 1 (Szegedy et al. 2015): #1x1, #3x3 reduce, #3x3,
# #5x5 reduce, #5x5, pool proj; a max pool (3x3/2) follows 3b and 4e.
MODULES = [
    ("3a", 64, 96, 128, 16, 32, 32), ("3b", 128, 128, 192, 32, 96, 64),
    ("4a", 192, 96, 208, 16, 48, 64), ("4b", 160, 112, 224, 24, 64, 64),
    ("4c", 128, 128, 256, 24, 64, 64), ("4d", 112, 144, 288, 32, 64, 64),
    ("4e", 256, 160, 320, 32, 128, 128), ("5a", 256, 160, 320, 32, 128, 128),
    ("5b", 384, 192, 384, 48, 128, 128),
]
POOL_AFTER = {"3b": "pool3", "4e": "pool4"}
_MAXPOOL_3x3_2 = dict(mode="max", kernel=3, stride=2, padding=1)


def _plan(width):
    """Per module: name, source tensor, input channels, convolutions as
    (branch, source branch or None, cin, cout, k)."""
    plan, src, cin = [], "pool2", 192 * width
    for name, c1, r3, c3, r5, c5, pp in MODULES:
        c1, r3, c3, r5, c5, pp = (v * width for v in (c1, r3, c3, r5, c5, pp))
        convs = [("b1", None, cin, c1, 1), ("b2r", None, cin, r3, 1), ("b2", "b2r", r3, c3, 3),
                 ("b3r", None, cin, r5, 1), ("b3", "b3r", r5, c5, 5), ("b4", "b4p", cin, pp, 1)]
        plan.append((name, src, convs))
        cin = c1 + c3 + c5 + pp
        src = POOL_AFTER.get(name, f"I{name}")
    return plan, cin


def generate(batch=32, image=128, width=1, classes=1000, seed=0):
    b = Builder(f"inception-w{width}-img{image}-b{batch}", seed=seed)
    b.input("image", (batch, 3, image, image))
    stem = [("conv1", 3, 64 * width, 7), ("conv2", 64 * width, 64 * width, 1),
            ("conv3", 64 * width, 192 * width, 3)]
    for name, cin, cout, k in stem:
        b.param(f"{name}.w", (cout, cin, k, k))
        b.param(f"{name}.b", (cout,))
    plan, final_c = _plan(width)
    for name, _, convs in plan:
        for branch, _, cin, cout, k in convs:
            b.param(f"I{name}.{branch}.w", (cout, cin, k, k))
            b.param(f"I{name}.{branch}.b", (cout,))
    b.param("fc.w", (final_c, classes))
    b.param("fc.b", (classes,))

    b.op("conv1", "conv2d", ["image", "conv1.w", "conv1.b"], stride=2, padding=3)
    b.op("relu1", "relu", ["conv1"])
    b.op("pool1", "pool2d", ["relu1"], **_MAXPOOL_3x3_2)
    b.op("conv2", "conv2d", ["pool1", "conv2.w", "conv2.b"])
    b.op("relu2", "relu", ["conv2"])
    b.op("conv3", "conv2d", ["relu2", "conv3.w", "conv3.b"], padding=1)
    b.op("relu3", "relu", ["conv3"])
    b.op("pool2", "pool2d", ["relu3"], **_MAXPOOL_3x3_2)
    for name, src, convs in plan:
        p = f"I{name}"
        b.op(f"{p}.b4p", "pool2d", [src], mode="max", kernel=3, stride=1, padding=1)
        for branch, after, _, _, k in convs:
            x = f"{p}.{after}" if after else src
            b.op(f"{p}.{branch}.conv", "conv2d", [x, f"{p}.{branch}.w", f"{p}.{branch}.b"],
                 padding=k // 2)
            b.op(f"{p}.{branch}", "relu", [f"{p}.{branch}.conv"])
        b.op(p, "concat", [f"{p}.b1", f"{p}.b2", f"{p}.b3", f"{p}.b4"], axis=1)
    b.op("pool3", "pool2d", ["I3b"], **_MAXPOOL_3x3_2)
    b.op("pool4", "pool2d", ["I4e"], **_MAXPOOL_3x3_2)
    b.op("gap", "global_pool2d", ["I5b"], mode="avg")
    b.op("flat", "flatten", ["gap"])
    b.op("logits", "matmul", ["flat", "fc.w", "fc.b"])
    b.op("prob", "softmax", ["logits"])
    b.output("prob")
    return b.build()
