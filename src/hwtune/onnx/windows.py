"""The attributes of 2-D window ops (Conv, pooling, their quantized forms)
as model.json takes them: ONNX pads with auto_pad resolved, asymmetric
padding, and the pairs of strides and dilations. Read by the float rules
(rules.py) and the quantized ones (quant.py) alike."""

from hwtune.onnx.errors import Unsupported


def pads2d(attrs, spatial, kernel, strides, dilations=(1, 1)):
    """[top, left, bottom, right] of a 2-D window op (ONNX's pads order),
    auto_pad resolved against the dilated kernel's extent."""
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0, 0, 0, 0]))
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    else:  # SAME_UPPER / SAME_LOWER: output = ceil(input / stride)
        pads = [0, 0, 0, 0]
        for i in range(2):
            out = -(-spatial[i] // strides[i])
            extent = (kernel[i] - 1) * dilations[i] + 1
            total = max((out - 1) * strides[i] + extent - spatial[i], 0)
            small = total // 2
            pads[i], pads[i + 2] = ((small, total - small) if auto == "SAME_UPPER"
                                    else (total - small, small))
    if len(pads) != 4 or any(int(p) < 0 for p in pads):
        raise Unsupported(f"pads {list(pads)} (2-D ops take 4 non-negative pads)")
    return [int(p) for p in pads]


def pad_attrs(pads):
    """model.json padding attributes of ONNX pads [top, left, bottom, right]:
    padding_end only when the padding is asymmetric."""
    out = {"padding": pads[:2]}
    if pads[2:] != pads[:2]:
        out["padding_end"] = pads[2:]
    return out


def pair_attr(attrs, key, default):
    v = [int(d) for d in attrs.get(key, default)]
    if len(v) != 2:
        raise Unsupported(f"{key} {v} (2-D ops take two)")
    return v
