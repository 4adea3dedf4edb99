"""PathNet (Graphi Table 1b): the same graph as
configs/models/templates/pathnet.json, written as a loop."""

from hwtune.graph.generators.builder import Builder


def generate(batch=64, image=32, channels=16, modules=6, layers=3, classes=10,
             in_channels=3, seed=0):
    b = Builder(f"pathnet-{layers}x{modules}-c{channels}-img{image}-b{batch}", seed=seed)
    b.input("image", (batch, in_channels, image, image))
    for layer in range(1, layers + 1):
        for m in range(1, modules + 1):
            b.param(f"P{layer}.{m}.w", (channels, in_channels if layer == 1 else channels, 3, 3))
            b.param(f"P{layer}.{m}.b", (channels,))
    side = image // 2 ** layers
    b.param("fc.w", (channels * side * side, classes))
    b.param("fc.b", (classes,))
    for layer in range(1, layers + 1):
        src = "image" if layer == 1 else f"P{layer - 1}.sum"
        for m in range(1, modules + 1):
            p = f"P{layer}.{m}"
            b.op(f"{p}.conv", "conv2d", [src, f"{p}.w", f"{p}.b"], padding=1)
            b.op(f"{p}.relu", "relu", [f"{p}.conv"])
            b.op(f"{p}.pool", "pool2d", [f"{p}.relu"], mode="max", kernel=2)
        b.op(f"P{layer}.sum", "sum", [f"P{layer}.{m}.pool" for m in range(1, modules + 1)])
    b.op("flat", "flatten", [f"P{layers}.sum"])
    b.op("logits", "matmul", ["flat", "fc.w", "fc.b"])
    b.op("prob", "softmax", ["logits"])
    b.output("prob")
    return b.build()
