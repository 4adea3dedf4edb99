"""Fresh names: the rule every pass that adds tensors or ops to a graph
(autodiff, the ONNX importer) uses to keep them from colliding."""


def fresh_name(base: str, taken: set, sep: str) -> str:
    """base, or else base<sep>2, base<sep>3, ...: the first that is not in
    `taken`, which it joins."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{sep}{k}"
    taken.add(name)
    return name
