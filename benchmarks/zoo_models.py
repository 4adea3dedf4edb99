"""The model zoo of issue #41: real architectures built with their own
library's code (torchvision classifiers, Hugging Face `transformers`
encoders and decoders, a bidirectional LSTM) with seeded random weights, and
exported to ONNX the way a user exports them.

Every entry has a full size (what users run: 224x224 images, BERT-base at
sequence 128) and a small size (the same code path with reduced width,
depth and resolution: the same ONNX op forms in a fraction of the time),
which the tests import. Nothing is downloaded: torchvision builds with
weights=None, transformers from config objects.

Used by benchmarks/bench_zoo.py and tests/test_zoo.py.
"""

from __future__ import annotations

import sys
import types
import warnings
from typing import Callable, Dict, NamedTuple

import numpy as np


def torchvision_models():
    """torchvision.models. torchvision's compiled detection ops do not load
    against the CPU build of torch these machines install ('operator
    torchvision::nms does not exist', raised while torchvision registers
    their meta kernels); the classifiers never call them, so the module that
    registers them is replaced by an empty one before the import."""
    if "torchvision" not in sys.modules:
        sys.modules.setdefault("torchvision._meta_registrations",
                               types.ModuleType("torchvision._meta_registrations"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from torchvision import models
    return models


class Built(NamedTuple):
    model: object                  # a torch.nn.Module in eval mode
    inputs: Dict[str, np.ndarray]  # ONNX input name -> value (the export's example)
    output_names: list
    family: str                    # "cnn", "transformer", "rnn"


class Entry(NamedTuple):
    name: str
    source: str                    # "torchvision", "transformers", "torch"
    build: Callable[[bool], Built]  # build(small) -> Built


def _seed():
    import torch
    torch.manual_seed(0)
    np.random.seed(0)


def _liven(model):
    """Seeded values for every parameter its library initialises to one
    constant: torchvision's ViT head is zeros (its output would be all
    zeros, and any engine "matches" it), ConvNeXt's layer scale is 1e-6
    (a wrong block would move the output by ~1e-6, under the 1e-4 bound),
    LayerNorm scales are ones and biases zeros (a dropped scale or bias
    would go unseen). Each becomes its constant plus N(0, 0.1^2) noise, or
    U(0.5, 1) for a layer scale, so every op shows in the output."""
    import torch
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.detach().reshape(-1)
            if flat.numel() == 0 or not bool((flat == flat[0]).all()):
                continue
            if "layer_scale" in name:
                p.copy_(torch.rand(p.shape, generator=g) * 0.5 + 0.5)
            else:
                p.add_(torch.randn(p.shape, generator=g) * 0.1)
    return model


def _randomize_bn(model):
    """Seeded running statistics for every BatchNorm (fresh ones are 0/1,
    which hide a wrong normalisation) and non-trivial affine parameters."""
    import torch
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            n = m.num_features
            m.running_mean.copy_(torch.randn(n, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
            if m.affine:
                m.weight.data.copy_(torch.rand(n, generator=g) * 0.5 + 0.75)
                m.bias.data.copy_(torch.randn(n, generator=g) * 0.1)
    return model


def _image(small, size=224, small_size=64, batch=1):
    s = small_size if small else size
    rng = np.random.default_rng(7)
    return {"x": rng.standard_normal((batch, 3, s, s)).astype(np.float32)}


def _tv(name, small_kwargs=None, full_kwargs=None, size=224, small_size=64):
    def build(small):
        _seed()
        M = torchvision_models()
        kwargs = dict(small_kwargs or {}) if small else dict(full_kwargs or {})
        model = _liven(_randomize_bn(getattr(M, name)(weights=None, **kwargs))).eval()
        return Built(model, _image(small, size, small_size), ["y"], "cnn")
    return Entry(name, "torchvision", build)


def _vit(small):
    _seed()
    M = torchvision_models()
    if small:
        from torchvision.models.vision_transformer import VisionTransformer
        model = VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                  hidden_dim=32, mlp_dim=64, num_classes=10)
        return Built(_liven(model).eval(), _image(True, small_size=32), ["y"], "transformer")
    return Built(_liven(M.vit_b_16(weights=None)).eval(), _image(False), ["y"], "transformer")


def _swin(small):
    _seed()
    M = torchvision_models()
    if small:
        from torchvision.models.swin_transformer import SwinTransformer
        model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                                num_heads=[2, 4], window_size=[4, 4], num_classes=10)
        return Built(_liven(model).eval(), _image(True, small_size=32), ["y"], "transformer")
    return Built(_liven(M.swin_t(weights=None)).eval(), _image(False), ["y"], "transformer")


def _tokens(small, vocab, with_type_ids=False):
    seq = 16 if small else 128
    rng = np.random.default_rng(11)
    ids = rng.integers(0, vocab, (1, seq)).astype(np.int64)
    mask = np.ones((1, seq), np.int64)
    mask[0, seq - seq // 4:] = 0  # padding at the end: the mask arithmetic is live
    out = {"input_ids": ids, "attention_mask": mask}
    if with_type_ids:
        out["token_type_ids"] = np.zeros((1, seq), np.int64)
    return out


class _HFWrap:
    """A transformers model as a module returning its last hidden state (a
    tensor, not a ModelOutput), inputs in a fixed order."""

    def __new__(cls, model, names):
        import torch

        class Wrap(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.m = model

            def forward(self, *args):
                out = self.m(**dict(zip(names, args)))
                return out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return Wrap().eval()


def _hf(name, config_cls, model_cls, small_cfg, type_ids=False):
    def build(small):
        _seed()
        # transformers' models import torchvision: without the stub first,
        # "Could not import module 'BertModel'" (operator torchvision::nms).
        torchvision_models()
        import transformers
        cfg = getattr(transformers, config_cls)(**(small_cfg if small else {}))
        cfg._attn_implementation = "eager"
        model = getattr(transformers, model_cls)(cfg).eval()
        inputs = _tokens(small, cfg.vocab_size, type_ids)
        return Built(_HFWrap(_liven(model), list(inputs)), inputs, ["y"], "transformer")
    return Entry(name, "transformers", build)


def _bilstm(small):
    import torch
    _seed()
    hidden, feat, seq = (16, 8, 5) if small else (256, 128, 32)

    class BiLSTM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.LSTM(feat, hidden, num_layers=2, bidirectional=True)

        def forward(self, x):
            return self.rnn(x)[0]
    rng = np.random.default_rng(5)
    x = rng.standard_normal((seq, 1, feat)).astype(np.float32)
    return Built(BiLSTM().eval(), {"x": x}, ["y"], "rnn")


def _bigru(small):
    import torch
    _seed()
    hidden, feat, seq = (16, 8, 5) if small else (256, 128, 32)

    class BiGRU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = torch.nn.GRU(feat, hidden, num_layers=2, bidirectional=True)

        def forward(self, x):
            return self.rnn(x)[0]
    rng = np.random.default_rng(6)
    x = rng.standard_normal((seq, 1, feat)).astype(np.float32)
    return Built(BiGRU().eval(), {"x": x}, ["y"], "rnn")


_SMALL_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=64, vocab_size=100, max_position_embeddings=64)

ZOO = [
    _tv("resnet50", {"num_classes": 10}),
    _tv("resnext50_32x4d", {"num_classes": 10}),
    _tv("wide_resnet50_2", {"num_classes": 10}),
    _tv("mobilenet_v2", {"width_mult": 0.25, "num_classes": 10}),
    _tv("mobilenet_v3_large", {"width_mult": 0.25, "num_classes": 10}),
    _tv("mobilenet_v3_small", {"width_mult": 0.25, "num_classes": 10}),
    _tv("efficientnet_b0", {"num_classes": 10}),
    _tv("mnasnet1_0", {"num_classes": 10}),
    _tv("shufflenet_v2_x1_0", {"num_classes": 10}),
    _tv("regnet_y_400mf", {"num_classes": 10}),
    _tv("regnet_x_400mf", {"num_classes": 10}),
    _tv("convnext_tiny", {"num_classes": 10}),
    _tv("densenet121", {"num_classes": 10}),
    _tv("googlenet", {"num_classes": 10, "aux_logits": False, "init_weights": True},
        {"aux_logits": False, "init_weights": True}),
    _tv("squeezenet1_1", {"num_classes": 10}),
    _tv("inception_v3", {"num_classes": 10, "aux_logits": False, "init_weights": True},
        {"aux_logits": False, "init_weights": True}, size=299, small_size=96),
    # AlexNet and VGG pool adaptively to 6x6 / 7x7, which the legacy exporter
    # takes only from a multiple: small means fewer classes, not fewer pixels.
    _tv("alexnet", {"num_classes": 10}, small_size=224),
    _tv("vgg11_bn", {"num_classes": 10}, small_size=224),
    Entry("vit_b_16", "torchvision", _vit),
    Entry("swin_t", "torchvision", _swin),
    _hf("bert_base", "BertConfig", "BertModel", _SMALL_BERT, type_ids=True),
    _hf("distilbert", "DistilBertConfig", "DistilBertModel",
        dict(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=100,
             max_position_embeddings=64)),
    _hf("gpt2", "GPT2Config", "GPT2Model",
        dict(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64)),
    _hf("roberta", "RobertaConfig", "RobertaModel", _SMALL_BERT),
    Entry("bilstm", "torch", _bilstm),
    Entry("bigru", "torch", _bigru),
]
BY_NAME = {e.name: e for e in ZOO}


def export(built: Built, path, exporter="legacy", opset=17):
    """torch.onnx.export of a built model with its example inputs, names as
    in built.inputs; returns path."""
    import torch
    args = tuple(torch.from_numpy(v) for v in built.inputs.values())
    kwargs = dict(input_names=list(built.inputs), output_names=built.output_names,
                  opset_version=opset)
    kwargs["dynamo"] = exporter != "legacy"
    # nn.MultiheadAttention's inference fast path is one fused aten op that no
    # ONNX exporter knows; users export with it off (ViT, Swin).
    torch.backends.mha.set_fastpath_enabled(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.no_grad():
            torch.onnx.export(built.model, args, str(path), **kwargs)
    return str(path)
