"""Small PyTorch models exported to ONNX inside the test suite (no network):
the kinds of network the importer must take; and ONNX files of graphs built
with onnx.helper (fin, save)."""

import warnings

import numpy as np

torch = None
nn = None


def _torch():
    global torch, nn
    if torch is None:
        import torch as t
        torch, nn = t, t.nn
    return torch


def exporters():
    """Exporters available here: the TorchScript one (opset 17) always, the
    dynamo one (torch's default, opset 18) when onnxscript is installed."""
    out = ["legacy"]
    try:
        import onnxscript  # noqa: F401
        out.append("dynamo")
    except ImportError:
        pass
    return out


def export(model, example, path, exporter="legacy", dynamic_batch=False, opset=None):
    """torch.onnx.export with input "x" and output "y"; returns path."""
    t = _torch()
    model.eval()
    kwargs = {"input_names": ["x"], "output_names": ["y"]}
    if exporter == "legacy":
        kwargs.update(dynamo=False, opset_version=opset or 17)
        if dynamic_batch:
            kwargs["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    else:
        kwargs.update(dynamo=True, opset_version=opset or 18)
        if dynamic_batch:
            kwargs["dynamic_shapes"] = {"x": {0: t.export.Dim("batch", min=1, max=64)}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t.onnx.export(model, (example,), str(path), **kwargs)
    return str(path)


def _randomize_bn(model):
    """Non-trivial running statistics, so batch norm really computes."""
    g = _torch().Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=g) * 0.4 - 0.2)
    return model


def resnet_cnn():
    """ResNet-style: conv/bn/relu stem, max pool, two residual blocks (one
    with a strided 1x1 projection), global average pool, fully connected."""
    t = _torch()
    t.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, cin, c, stride):
            super().__init__()
            self.c1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
            self.b1 = nn.BatchNorm2d(c)
            self.c2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.b2 = nn.BatchNorm2d(c)
            self.down = None
            if stride != 1 or cin != c:
                self.down = nn.Sequential(nn.Conv2d(cin, c, 1, stride, bias=False),
                                          nn.BatchNorm2d(c))

        def forward(self, x):
            idn = x if self.down is None else self.down(x)
            return t.relu(self.b2(self.c2(t.relu(self.b1(self.c1(x))))) + idn)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.MaxPool2d(3, 2, 1)
            self.layer1 = Block(8, 8, 1)
            self.layer2 = Block(8, 16, 2)
            self.gap = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            x = self.pool(t.relu(self.bn(self.stem(x))))
            x = self.gap(self.layer2(self.layer1(x)))
            return self.fc(t.flatten(x, 1))

    return _randomize_bn(Net()), t.randn(2, 3, 32, 32)


def assorted():
    """Many rows of the op table in one graph: batch norm after an add (not
    folded into a conv), average pool, ReLU6 (Clip), sigmoid/tanh, scalar
    arithmetic on both sides, concat, split, slice, mean over H and W,
    reshape/squeeze/unsqueeze, Linear over a 3-D tensor, softmax."""
    t = _torch()
    t.manual_seed(2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1 = nn.Conv2d(4, 8, 3, padding=1)
            self.c2 = nn.Conv2d(4, 8, 1)
            self.bn = nn.BatchNorm2d(8)
            self.pool = nn.AvgPool2d(2, 2)
            self.proj = nn.Linear(4, 6)
            self.fc = nn.Linear(20, 5)

        def forward(self, x):
            y = self.bn(self.c1(x) + self.c2(x))
            y = nn.functional.relu6(y) * 0.5 + 1.0
            y = self.pool(t.sigmoid(y) - t.tanh(1.0 - y))
            a, b = t.split(y, [3, 5], dim=1)
            y = t.cat([b, a[:, 1:3]], dim=1)               # 7 channels
            m = y.mean((2, 3))                              # [N, 7]
            seq = x.flatten(2)[:, :, 4:8]                  # [N, 4, 4]: Linear on 3-D
            p = self.proj(seq)[:, 1]                        # Gather at a constant index
            z = t.cat([m, m[:, :1].unsqueeze(2).squeeze(2), p, t.zeros_like(p[:, :8])], 1)
            return t.softmax(self.fc(z) / 2.0, dim=-1)

    return _randomize_bn(Net()), t.randn(2, 4, 8, 8)


def mlp():
    t = _torch()
    t.manual_seed(3)
    net = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Dropout(0.1),
                        nn.Linear(32, 10), nn.Softmax(dim=1))
    return net, t.randn(4, 3, 4, 4)


def mobilenet_block():
    """Depthwise separable block with ReLU6 (Clip 0..6)."""
    t = _torch()
    net = nn.Sequential(nn.Conv2d(3, 8, 3, 2, 1), nn.BatchNorm2d(8), nn.ReLU6(),
                        nn.Conv2d(8, 8, 3, 1, 1, groups=8), nn.BatchNorm2d(8), nn.ReLU6(),
                        nn.Conv2d(8, 16, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                        nn.Linear(16, 4))
    return net, t.randn(1, 3, 32, 32)


def dilated_cnn():
    """Dilated convolutions (DeepLab-style atrous): "same" padding, strided
    with unequal dilations, and a dilated depthwise conv."""
    t = _torch()
    t.manual_seed(5)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=2, dilation=2), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, stride=2, padding=(1, 2), dilation=(2, 3)),
                        nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8), nn.ReLU(),
                        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
    return _randomize_bn(net), t.randn(2, 3, 17, 16)


def same_padding_cnn():
    """padding="same" with even kernels: Conv with auto_pad SAME_UPPER, one
    more row and column of padding after than before (asymmetric)."""
    t = _torch()
    t.manual_seed(6)
    net = nn.Sequential(nn.Conv2d(3, 8, 2, padding="same"), nn.ReLU(),
                        nn.Conv2d(8, 8, 4, padding="same"), nn.ReLU(),
                        nn.MaxPool2d(2), nn.Conv2d(8, 4, (2, 3), padding="same"))
    return net, t.randn(1, 3, 12, 11)


def conv_transpose_net():
    """DCGAN-style generator: ConvTranspose2d upsampling with padding and
    output_padding, then a dilated and grouped one."""
    t = _torch()
    t.manual_seed(7)
    net = nn.Sequential(nn.ConvTranspose2d(8, 6, 4, stride=2, padding=1), nn.BatchNorm2d(6),
                        nn.ReLU(),
                        nn.ConvTranspose2d(6, 4, 3, stride=2, padding=1, output_padding=1),
                        nn.ReLU(),
                        nn.ConvTranspose2d(4, 4, 3, padding=2, dilation=2, groups=2),
                        nn.Tanh())
    return _randomize_bn(net), t.randn(2, 8, 5, 5)


def padded_cnn():
    """Explicit padding: a constant of 0.5 on every side of a 3-D map
    (channels included), zero padding before a conv (ZeroPad2d,
    asymmetric), and padding of the flattened features with -1."""
    t = _torch()
    t.manual_seed(8)
    F = nn.functional

    class Padded(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(4, 6, 3)
            self.zero = nn.ZeroPad2d((1, 2, 0, 1))
            self.conv2 = nn.Conv2d(6, 4, 3, stride=2)
            self.fc = nn.Linear(4 * 4 * 4 + 3, 5)

        def forward(self, x):
            x = F.pad(x, (1, 0, 2, 1, 0, 1), value=0.5)
            x = self.zero(F.relu(self.conv1(x)))
            x = F.relu(self.conv2(x)).flatten(1)
            return self.fc(F.pad(x, (2, 1), value=-1.0))
    return Padded(), t.randn(2, 3, 7, 8)


def reducing_net():
    """Reductions exporters write outside pooling: a hand-written layer
    norm (mean over the last axis, keepdim), a sum over the sequence and a
    mean over two axes without keepdim."""
    t = _torch()
    t.manual_seed(9)

    class Reducing(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 7)

        def forward(self, x):
            h = self.fc(x)
            c = h - h.mean(-1, keepdim=True)
            s = (c * c).sum(1)
            return s + c.mean((0, 2)).sum()
    return Reducing(), t.randn(3, 5, 6)


def strided_net():
    """Strided and reversed slices (x[:, ::2], flip) and a fixed channel
    permutation (index_select): Slice with steps and Gather at
    non-consecutive constant indices."""
    t = _torch()
    t.manual_seed(10)

    class Strided(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 6, 3, padding=1)
            self.register_buffer("perm", t.tensor([5, 0, 3, 3, 1]))

        def forward(self, x):
            y = self.conv(x)[:, :, ::2, 1::3]
            y = t.index_select(y, 1, self.perm)
            return t.flip(y, [3]) + y
    return Strided(), t.randn(2, 3, 9, 10)


def transformer():
    t = _torch()
    layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0,
                                       activation="gelu", batch_first=True)
    return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), t.randn(1, 5, 16)


class _Recurrent:
    @staticmethod
    def make(kind, **kwargs):
        t = _torch()
        t.manual_seed(4)
        rnn = getattr(nn, kind)(8, 12, num_layers=2, batch_first=True, **kwargs)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = rnn

            def forward(self, x):
                return self.rnn(x)[0]

        return Net(), t.randn(1, 6, 8)


def gru():
    return _Recurrent.make("GRU")


def lstm():
    return _Recurrent.make("LSTM")


def bidirectional_gru():
    """Both directions, two layers (issue #41)."""
    return _Recurrent.make("GRU", bidirectional=True)


def ort_outputs(path, inputs):
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {k: np.asarray(v, np.float32)
                                           for k, v in inputs.items()})))


def rel_err(got, want):
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    return float(np.abs(got - want).max()) / max(float(np.abs(want).max()), 1e-30)


def fin(name, shape):
    """A float32 graph input or output of that shape (onnx.helper)."""
    from onnx import TensorProto, helper
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def save(nodes, inputs, outputs, inits, path, opset=17):
    """An ONNX file of one graph (nodes, value infos, initializers by name)
    at path, default opset 17; its path as a string."""
    import onnx
    from onnx import helper, numpy_helper
    g = helper.make_graph(nodes, "g", inputs, outputs,
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def op_types(graph):
    """The op type of each op of an imported graph, in order."""
    return [op.op for op in graph.ops]


def import_and_compare(path, tmp_path, feeds, tol=1e-4, threads=2):
    """Import the ONNX file at path; its numpy reference and the C engine
    match ONNX Runtime within tol of each output's scale. Returns the
    imported graph."""
    import pytest
    ort = pytest.importorskip("onnxruntime")
    from conftest import run_engine
    from hwtune.graph import load_model, run_reference
    from hwtune.onnx.importer import import_onnx
    out = tmp_path / "m.json"
    import_onnx(str(path), str(out))
    g = load_model(str(out))
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    ref = run_reference(g, feeds)
    got = run_engine(g, feeds, threads=threads)
    for o in g.outputs:
        scale = max(float(np.abs(want[o]).max()), 1e-30)
        assert ref[o].shape == want[o].shape, (o, ref[o].shape, want[o].shape)
        assert np.abs(ref[o] - want[o]).max() <= tol * scale, (o, "reference")
        assert np.abs(got[o] - want[o]).max() <= tol * scale, (o, "engine")
    return g


def run_matches_ort(built, src, tmp_path, tol=1e-4):
    """`hwtune run` of the exported file src on built.inputs (one run, its
    outputs saved) matches ONNX Runtime's outputs within tol of each
    output's scale; a constant output (a zero-initialised head) would match
    anything, so it fails."""
    import onnxruntime as ort
    from conftest import invoke
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, built.inputs)))
    flags = []
    for k, v in built.inputs.items():
        np.save(tmp_path / f"{k}.npy", v)
        flags += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    out = tmp_path / "out.npz"
    res = invoke("run", src, *flags, "--save-outputs", out, "--reps", 1, "--warmup", 0,
                 "--db", tmp_path / "r.db")
    assert res.exit_code == 0, res.output
    got = np.load(out)
    for k, v in want.items():
        assert float(np.std(v)) > 1e-3 * float(np.abs(v).max()) > 0, (k, "constant output")
        assert rel_err(got[k], v) <= tol, (k, rel_err(got[k], v))
