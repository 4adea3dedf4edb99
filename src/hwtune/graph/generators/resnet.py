"""ResNet-18 (NeoCPU's batch-1 inference workload): the same graph as
configs/models/templates/resnet.json, written as a loop."""

from hwtune.graph.generators.builder import Builder

STAGES = [(2, 64), (3, 128), (4, 256), (5, 512)]  # (stage number, channels)
BLOCKS_PER_STAGE = 2  # ResNet-18; ResNet-34 would be [3, 4, 6, 3]


def _bn_params(b, p, c):
    b.param(f"{p}.gamma", (c,), low=0.8, high=1.2)
    b.param(f"{p}.beta", (c,))
    b.param(f"{p}.mean", (c,))
    b.param(f"{p}.var", (c,), low=0.5, high=1.5)


def _blocks():
    out, cin, src = [], 64, "pool1"
    for stage, c in STAGES:
        for k in range(BLOCKS_PER_STAGE):
            stride = 2 if k == 0 and stage > 2 else 1
            name = f"{stage}{'ab'[k]}"
            out.append((name, src, cin, c, stride, stride != 1 or cin != c))
            cin, src = c, f"B{name}"
    return out


def generate(batch=1, image=224, classes=1000, seed=0):
    b = Builder(f"resnet18-img{image}-b{batch}", seed=seed)
    b.input("image", (batch, 3, image, image))
    b.param("conv0.w", (64, 3, 7, 7))
    _bn_params(b, "bn0", 64)
    blocks = _blocks()
    for name, _, cin, c, _, down in blocks:
        b.param(f"B{name}.conv1.w", (c, cin, 3, 3))
        b.param(f"B{name}.conv2.w", (c, c, 3, 3))
        if down:
            b.param(f"B{name}.proj.w", (c, cin, 1, 1))
        for bn in ("bn1", "bn2") + (("bnp",) if down else ()):
            _bn_params(b, f"B{name}.{bn}", c)
    b.param("fc.w", (512, classes))
    b.param("fc.b", (classes,))

    def bn(p, x):
        return b.op(p, "batch_norm", [x] + [f"{p}.{k}" for k in ("gamma", "beta", "mean", "var")])

    b.op("conv0", "conv2d", ["image", "conv0.w"], stride=2, padding=3)
    bn("bn0", "conv0")
    b.op("relu0", "relu", ["bn0"])
    b.op("pool1", "pool2d", ["relu0"], mode="max", kernel=3, stride=2, padding=1)
    for name, src, _, _, stride, down in blocks:
        p = f"B{name}"
        b.op(f"{p}.conv1", "conv2d", [src, f"{p}.conv1.w"], stride=stride, padding=1)
        bn(f"{p}.bn1", f"{p}.conv1")
        b.op(f"{p}.relu1", "relu", [f"{p}.bn1"])
        b.op(f"{p}.conv2", "conv2d", [f"{p}.relu1", f"{p}.conv2.w"], padding=1)
        bn(f"{p}.bn2", f"{p}.conv2")
        shortcut = src
        if down:
            b.op(f"{p}.proj", "conv2d", [src, f"{p}.proj.w"], stride=stride)
            shortcut = bn(f"{p}.bnp", f"{p}.proj")
        b.op(f"{p}.add", "add", [f"{p}.bn2", shortcut])
        b.op(p, "relu", [f"{p}.add"])
    b.op("gap", "global_pool2d", [f"B{blocks[-1][0]}"], mode="avg")
    b.op("flat", "flatten", ["gap"])
    b.op("logits", "matmul", ["flat", "fc.w", "fc.b"])
    b.op("prob", "softmax", ["logits"])
    b.output("prob")
    return b.build()
