"""The held-out architectures of issue #41: torchvision and transformers
families that are NOT in the zoo (benchmarks/zoo_models.py), built by their
own library code with seeded weights and small sizes (nothing downloaded),
exported the same way (torch.onnx.export, TorchScript exporter, opset 17).
They exercise the op forms the zoo does not: Resize in segmentation heads,
relative position buckets (T5, DeBERTa), GroupNorm and grouped Conv1d
(Wav2Vec2), rotary embeddings and RMSNorm (LLaMA family), ALiBi (BLOOM).

    python benchmarks/heldout_models.py --table [--only a,b] [--workdir DIR]
        [--exporter legacy|dynamo] [--zoo]

prints one row per model: exported?, `hwtune import` ok or its error line,
and the engine's max error against ONNX Runtime relative to the output's
scale (the check `hwtune compare --with ort` makes; the bound is 1e-4).
A model whose torch export itself fails is listed as such and skipped.
Used by tests/test_heldout_models.py (the ones that pass).
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zoo_models as Z  # noqa: E402
from zoo_models import Built, Entry, _image, _liven, _randomize_bn, _seed, _tv  # noqa: E402

TOL = 1e-4


def _tv_module(name, make, small_size=64):
    """A torchvision model built by make(models, small) (a module in eval
    mode after seeded statistics); segmentation models return a dict, so the
    "out" entry is taken."""
    def build(small):
        import torch
        _seed()
        M = Z.torchvision_models()
        model = _liven(_randomize_bn(make(M, small))).eval()
        if "segmentation" in type(model).__module__:
            inner = model

            class Seg(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.m = inner

                def forward(self, x):
                    return self.m(x)["out"]
            model = Seg().eval()
        return Built(model, _image(small, small_size=small_size), ["y"], "cnn")
    return Entry(name, "torchvision", build)


def _swin_v2(M, small):
    if not small:
        return M.swin_v2_t(weights=None)
    from torchvision.models.swin_transformer import (PatchMergingV2, SwinTransformer,
                                                     SwinTransformerBlockV2)
    return SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
                           window_size=[4, 4], num_classes=10, block=SwinTransformerBlockV2,
                           downsample_layer=PatchMergingV2)


def _maxvit(M, small):
    if not small:
        return M.maxvit_t(weights=None)
    from torchvision.models.maxvit import MaxVit
    return MaxVit(input_size=(64, 64), stem_channels=8, partition_size=4, block_channels=[16, 32],
                  block_layers=[1, 1], head_dim=8, stochastic_depth_prob=0.0, num_classes=10)


def _vit32(M, small):
    if not small:
        return M.vit_b_32(weights=None)
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=64, patch_size=32, num_layers=1, num_heads=2,
                             hidden_dim=32, mlp_dim=64, num_classes=10)


def _seg(name):
    def make(M, small):
        return getattr(M.segmentation, name)(weights=None, weights_backbone=None,
                                             num_classes=5, aux_loss=False)
    return make


def _video(name):
    """A torchvision video classifier on a [1, 3, 4, 32, 32] clip (small) or
    [1, 3, 16, 112, 112] (full): Conv3d and 3-D pooling."""
    def build(small):
        _seed()
        M = Z.torchvision_models()
        model = _liven(_randomize_bn(getattr(M.video, name)(weights=None, num_classes=10))).eval()
        shape = (1, 3, 4, 32, 32) if small else (1, 3, 16, 112, 112)
        x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
        return Built(model, {"x": x}, ["y"], "cnn")
    return Entry(name, "torchvision", build)


def _raft_small(small):
    """torchvision's RAFT-small optical flow on two 128x128 (small) or
    224x224 frames, two flow updates (small): the last flow estimate."""
    import torch
    _seed()
    M = Z.torchvision_models()
    inner = _liven(_randomize_bn(M.optical_flow.raft_small(weights=None))).eval()
    steps = 2 if small else 12

    class Flow(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.m = inner

        def forward(self, a, b):
            return self.m(a, b, num_flow_updates=steps)[-1]
    s = 128 if small else 224  # RAFT's correlation pyramid needs 16x16 feature maps
    rng = np.random.default_rng(7)
    feeds = {k: rng.standard_normal((1, 3, s, s)).astype(np.float32) for k in ("a", "b")}
    return Built(Flow().eval(), feeds, ["y"], "cnn")


def _hf(name, config_cls, model_cls, small_cfg, inputs="tokens", encoder=False):
    """A transformers model built from a tiny config (eager attention, no
    cache), returning its last hidden state."""
    def build(small):
        _seed()
        Z.torchvision_models()
        import transformers
        cfg = getattr(transformers, config_cls)(**small_cfg)
        cfg._attn_implementation = "eager"
        if hasattr(cfg, "use_cache"):
            cfg.use_cache = False
        model = getattr(transformers, model_cls)(cfg).eval()
        if encoder:
            model = model.get_encoder()
        rng = np.random.default_rng(13)
        if callable(inputs):  # feeds(cfg, rng): a model's own input form
            feeds = inputs(cfg, rng)
        elif inputs == "tokens":
            feeds = Z._tokens(True, getattr(cfg, "vocab_size", 100))
        elif inputs == "seq2seq":  # no shift_tokens_right in the model: decoder ids given
            feeds = dict(Z._tokens(True, cfg.vocab_size))
            feeds["decoder_input_ids"] = feeds["input_ids"][:, ::-1].copy()
        elif inputs == "pixels":
            s = cfg.image_size
            feeds = {"pixel_values": rng.standard_normal((1, 3, s, s)).astype(np.float32)}
        elif inputs == "mel":
            feeds = {"input_features": rng.standard_normal(
                (1, cfg.num_mel_bins, 2 * cfg.max_source_positions)).astype(np.float32)}
        elif inputs == "audio":
            feeds = {"input_values": rng.standard_normal((1, 800)).astype(np.float32)}
        else:
            raise ValueError(inputs)
        return Built(Z._HFWrap(_liven(model), list(feeds)), feeds, ["y"], "transformer")
    return Entry(name, "transformers", build)


_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
             intermediate_size=64, vocab_size=100, max_position_embeddings=64)
_SEQ2SEQ = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
                vocab_size=100, max_position_embeddings=64)
_DECODER = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=2, num_key_value_heads=1, vocab_size=100,
                max_position_embeddings=64)
_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
               num_attention_heads=2, image_size=32, patch_size=8)


def _randn(name, *shape):
    """feeds(cfg, rng) of one float input of a fixed shape, named by the
    model's forward argument."""
    def feeds(cfg, rng):
        return {name: rng.standard_normal(shape).astype(np.float32)}
    return feeds


def _video_pixels(cfg, rng):
    """[1, frames, 3, H, W] clips (VideoMAE, TimeSformer, ViViT)."""
    return {"pixel_values": rng.standard_normal(
        (1, cfg.num_frames, 3, cfg.image_size, cfg.image_size)).astype(np.float32)}


def _ast_input(cfg, rng):
    return {"input_values": rng.standard_normal(
        (1, cfg.max_length, cfg.num_mel_bins)).astype(np.float32)}


def _s2t_input(cfg, rng):
    return {"input_features": rng.standard_normal(
        (1, 32, cfg.input_feat_per_channel)).astype(np.float32)}


def _mae_input(cfg, rng):
    """ViTMAE's pixels and its masking noise (given, not drawn inside the
    model: RandomUniformLike would differ from ONNX Runtime's draw)."""
    s, p = cfg.image_size, cfg.patch_size
    return {"pixel_values": rng.standard_normal((1, 3, s, s)).astype(np.float32),
            "noise": rng.random((1, (s // p) ** 2)).astype(np.float32)}


HELDOUT = [
    _tv("resnet18", {"num_classes": 10}),
    _tv("resnet101", {"num_classes": 10}),
    _tv("efficientnet_v2_s", {"num_classes": 10}),
    _tv("regnet_y_800mf", {"num_classes": 10}),
    _tv("squeezenet1_0", {"num_classes": 10}),
    _tv("densenet161", {"num_classes": 10}),
    _tv("mnasnet0_5", {"num_classes": 10}),
    _tv("shufflenet_v2_x0_5", {"num_classes": 10}),
    _tv_module("swin_v2_t", _swin_v2, small_size=32),
    _tv_module("maxvit_t", _maxvit),
    _tv_module("vit_b_32", _vit32),
    _tv_module("fcn_resnet50", _seg("fcn_resnet50")),
    _tv_module("deeplabv3_mobilenet_v3_large", _seg("deeplabv3_mobilenet_v3_large")),
    _tv_module("lraspp_mobilenet_v3_large", _seg("lraspp_mobilenet_v3_large")),
    _video("r3d_18"),
    _video("r2plus1d_18"),
    _hf("albert", "AlbertConfig", "AlbertModel", dict(_BERT, embedding_size=16)),
    _hf("electra", "ElectraConfig", "ElectraModel", dict(_BERT, embedding_size=16)),
    _hf("xlm_roberta", "XLMRobertaConfig", "XLMRobertaModel", _BERT),
    _hf("mpnet", "MPNetConfig", "MPNetModel", _BERT),
    _hf("deberta_v2", "DebertaV2Config", "DebertaV2Model",
        dict(_BERT, relative_attention=True, position_buckets=8, max_relative_positions=16,
             pos_att_type=["p2c", "c2p"])),
    _hf("bart", "BartConfig", "BartModel", _SEQ2SEQ),
    _hf("t5_encoder", "T5Config", "T5EncoderModel",
        dict(d_model=32, d_kv=16, d_ff=64, num_layers=2, num_heads=2, vocab_size=100,
             relative_attention_num_buckets=8)),
    _hf("whisper_encoder", "WhisperConfig", "WhisperModel",
        dict(_SEQ2SEQ, num_mel_bins=16, max_source_positions=16, pad_token_id=1,
             bos_token_id=0, eos_token_id=2, decoder_start_token_id=0),
        inputs="mel", encoder=True),
    _hf("wav2vec2", "Wav2Vec2Config", "Wav2Vec2Model",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
             do_stable_layer_norm=False, feat_extract_norm="group"), inputs="audio"),
    _hf("clip_vision", "CLIPVisionConfig", "CLIPVisionModel", _VISION, inputs="pixels"),
    _hf("clip_text", "CLIPTextConfig", "CLIPTextModel",
        dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             vocab_size=100, max_position_embeddings=64), inputs="tokens"),
    _hf("beit", "BeitConfig", "BeitModel",
        dict(_VISION, use_relative_position_bias=True), inputs="pixels"),
    _hf("deit", "DeiTConfig", "DeiTModel", _VISION, inputs="pixels"),
    _hf("mobilebert", "MobileBertConfig", "MobileBertModel",
        dict(hidden_size=32, embedding_size=16, intra_bottleneck_size=16, true_hidden_size=16,
             num_attention_heads=2, intermediate_size=32, num_hidden_layers=2,
             num_feedforward_networks=2, vocab_size=100, max_position_embeddings=64)),
    _hf("opt", "OPTConfig", "OPTModel",
        dict(hidden_size=32, num_hidden_layers=2, ffn_dim=64, num_attention_heads=2,
             vocab_size=100, max_position_embeddings=64, word_embed_proj_dim=32)),
    _hf("gpt_neo", "GPTNeoConfig", "GPTNeoModel",
        dict(hidden_size=32, num_layers=2, num_heads=2, attention_types=[[["global", "local"], 1]],
             window_size=8, vocab_size=100, max_position_embeddings=64, intermediate_size=64)),
    _hf("llama", "LlamaConfig", "LlamaModel", _DECODER),
    _hf("mistral", "MistralConfig", "MistralModel", dict(_DECODER, sliding_window=None)),
    _hf("qwen2", "Qwen2Config", "Qwen2Model", _DECODER),
    _hf("phi", "PhiConfig", "PhiModel", dict(_DECODER, partial_rotary_factor=0.5)),
    _hf("bloom", "BloomConfig", "BloomModel",
        dict(hidden_size=32, n_layer=2, n_head=2, vocab_size=100)),
    _hf("falcon", "FalconConfig", "FalconModel",
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, vocab_size=100,
             new_decoder_architecture=False, alibi=False)),
    _hf("gpt_neox", "GPTNeoXConfig", "GPTNeoXModel",
        dict(_BERT, rotary_pct=0.5)),
    _hf("gptj", "GPTJConfig", "GPTJModel",
        dict(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64, rotary_dim=8)),
    _hf("gemma", "GemmaConfig", "GemmaModel", dict(_DECODER, head_dim=16)),
    _hf("pegasus", "PegasusConfig", "PegasusModel", _SEQ2SEQ, inputs="seq2seq"),
    _hf("hubert", "HubertConfig", "HubertModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4), inputs="audio"),
    _hf("squeezebert", "SqueezeBertConfig", "SqueezeBertModel",
        dict(_BERT, embedding_size=32, q_groups=2, k_groups=2, v_groups=2,
             post_attention_groups=2, intermediate_groups=2, output_groups=2)),
    _hf("convbert", "ConvBertConfig", "ConvBertModel", dict(_BERT, embedding_size=32)),
    _hf("funnel", "FunnelConfig", "FunnelModel",
        dict(block_sizes=[1, 1], d_model=32, n_head=2, d_head=16, d_inner=64, vocab_size=100,
             num_decoder_layers=1)),
    _hf("dinov2", "Dinov2Config", "Dinov2Model",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2,
             image_size=32, patch_size=8), inputs="pixels"),
    _hf("segformer", "SegformerConfig", "SegformerModel",
        dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
             patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
             mlp_ratios=[2, 2], image_size=32), inputs="pixels"),
    _hf("mobilevit", "MobileViTConfig", "MobileViTModel", dict(image_size=64), inputs="pixels"),
    # a second held-out round (session of 2026-12-06 16:00): families none of
    # the above covers; XLNet (EyeLike, a one-operand Einsum, ids transposed
    # before their lookup, a 1e30 mask) and Phi-3 (an empty Slice) failed.
    _video("mc3_18"),
    _video("swin3d_t"),  # an empty Slice [0:0] stopped it before (onnx/rules.py slice_)
    _tv_module("deeplabv3_resnet50", _seg("deeplabv3_resnet50")),
    _hf("xlnet", "XLNetConfig", "XLNetModel",
        dict(d_model=32, n_layer=2, n_head=2, d_inner=64, vocab_size=100)),
    _hf("phi3", "Phi3Config", "Phi3Model", dict(_DECODER, pad_token_id=0)),
    _hf("roformer", "RoFormerConfig", "RoFormerModel", dict(_BERT, embedding_size=32)),
    _hf("esm", "EsmConfig", "EsmModel",
        dict(_BERT, position_embedding_type="rotary", pad_token_id=1, mask_token_id=2)),
    _hf("gpt_bigcode", "GPTBigCodeConfig", "GPTBigCodeModel",
        dict(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64, multi_query=True)),
    _hf("codegen", "CodeGenConfig", "CodeGenModel",
        dict(n_embd=32, n_layer=2, n_head=2, vocab_size=100, n_positions=64, rotary_dim=8,
             n_ctx=64)),
    _hf("biogpt", "BioGptConfig", "BioGptModel", _BERT),
    _hf("stablelm", "StableLmConfig", "StableLmModel", _DECODER),
    _hf("olmo", "OlmoConfig", "OlmoModel", _DECODER),
    _hf("granite", "GraniteConfig", "GraniteModel", _DECODER),
    _hf("mbart", "MBartConfig", "MBartModel", _SEQ2SEQ, inputs="seq2seq"),
    _hf("marian", "MarianConfig", "MarianModel",
        dict(_SEQ2SEQ, pad_token_id=1, decoder_start_token_id=1), inputs="seq2seq"),
    _hf("t5", "T5Config", "T5Model",
        dict(d_model=32, d_kv=16, d_ff=64, num_layers=1, num_heads=2, vocab_size=100,
             relative_attention_num_buckets=8, decoder_start_token_id=0), inputs="seq2seq"),
    _hf("vit_hf", "ViTConfig", "ViTModel", _VISION, inputs="pixels"),
    _hf("swin_hf", "SwinConfig", "SwinModel",
        dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[1, 2],
             window_size=4), inputs="pixels"),
    _hf("convnextv2", "ConvNextV2Config", "ConvNextV2Model",
        dict(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], image_size=32),
        inputs="pixels"),
    _hf("poolformer", "PoolFormerConfig", "PoolFormerModel",
        dict(hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1], image_size=32),
        inputs="pixels"),
    _hf("levit", "LevitConfig", "LevitModel",
        dict(image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2],
             depths=[1, 1, 1], key_dim=[8, 8, 8]), inputs="pixels"),
    _hf("resnet_hf", "ResNetConfig", "ResNetModel",
        dict(hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1], embedding_size=16,
             image_size=32), inputs="pixels"),
    _hf("wavlm", "WavLMConfig", "WavLMModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, num_buckets=16,
             max_bucket_distance=32), inputs="audio"),
    _hf("data2vec_audio", "Data2VecAudioConfig", "Data2VecAudioModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=5, conv_pos_kernel_size=5,
             num_conv_pos_embedding_groups=4), inputs="audio"),
    _hf("ibert", "IBertConfig", "IBertModel", _BERT),
    _hf("rembert", "RemBertConfig", "RemBertModel",
        dict(_BERT, input_embedding_size=16, output_embedding_size=16)),
    # Families tried on 2026-12-07 (each matched ORT within 4.5e-7 of the
    # output's scale at its first try). Tried and left out: Longformer and
    # LED (NonZero on the attention mask: a data-dependent shape, which
    # hwtune's plan cannot size; one error line, exit 2), CANINE (its
    # export fails ORT's own shape check too), and models whose export
    # itself failed: Nystromformer, Mixtral and Qwen2-MoE (index_put_),
    # Cohere (legacy exporter; the dynamo one exports it, and it matches).
    _hf("bigbird", "BigBirdConfig", "BigBirdModel", dict(_BERT, attention_type="original_full")),
    _hf("flaubert", "FlaubertConfig", "FlaubertModel",
        dict(emb_dim=32, n_layers=2, n_heads=2, vocab_size=100, max_position_embeddings=64)),
    _hf("xlm", "XLMConfig", "XLMModel",
        dict(emb_dim=32, n_layers=2, n_heads=2, vocab_size=100, max_position_embeddings=64)),
    _hf("ctrl", "CTRLConfig", "CTRLModel",
        dict(n_embd=32, n_layer=2, n_head=2, dff=64, vocab_size=100, n_positions=64)),
    _hf("megatron_bert", "MegatronBertConfig", "MegatronBertModel", _BERT),
    _hf("ernie", "ErnieConfig", "ErnieModel", _BERT),
    _hf("splinter", "SplinterConfig", "SplinterModel", _BERT),
    _hf("m2m100", "M2M100Config", "M2M100Model", _SEQ2SEQ, inputs="seq2seq"),
    _hf("blenderbot", "BlenderbotConfig", "BlenderbotModel", _SEQ2SEQ, inputs="seq2seq"),
    _hf("plbart", "PLBartConfig", "PLBartModel", _SEQ2SEQ, inputs="seq2seq"),
    _hf("prophetnet", "ProphetNetConfig", "ProphetNetModel",
        dict(hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=1,
             num_decoder_layers=1, num_encoder_attention_heads=2,
             num_decoder_attention_heads=2, vocab_size=100, max_position_embeddings=64,
             ngram=2, num_buckets=8, relative_max_distance=16), inputs="seq2seq"),
    _hf("fsmt", "FSMTConfig", "FSMTModel",
        dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
             decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
             src_vocab_size=100, tgt_vocab_size=100, max_position_embeddings=64,
             langs=["en", "de"]), inputs="seq2seq"),
    _hf("qwen3", "Qwen3Config", "Qwen3Model", dict(_DECODER, head_dim=16)),
    _hf("gemma2", "Gemma2Config", "Gemma2Model", dict(_DECODER, head_dim=16)),
    _hf("starcoder2", "Starcoder2Config", "Starcoder2Model", _DECODER),
    _hf("persimmon", "PersimmonConfig", "PersimmonModel", dict(_DECODER, num_key_value_heads=2)),
    _hf("nemotron", "NemotronConfig", "NemotronModel", dict(_DECODER, head_dim=16)),
    _hf("mobilenet_v1_hf", "MobileNetV1Config", "MobileNetV1Model",
        dict(image_size=32, depth_multiplier=0.25), inputs="pixels"),
    _hf("focalnet", "FocalNetConfig", "FocalNetModel",
        dict(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], hidden_sizes=[16, 32]),
        inputs="pixels"),
    _hf("vit_msn", "ViTMSNConfig", "ViTMSNModel", _VISION, inputs="pixels"),
    _hf("dpt", "DPTConfig", "DPTModel",
        dict(_VISION, num_hidden_layers=4, backbone_out_indices=[0, 1, 2, 3],
             neck_hidden_sizes=[8, 8, 8, 8], fusion_hidden_size=16), inputs="pixels"),
    _hf("unispeech", "UniSpeechConfig", "UniSpeechModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4), inputs="audio"),
    _hf("sew", "SEWConfig", "SEWModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4, squeeze_factor=2),
        inputs="audio"),
    # session of 2026-12-07 (14:30): YOSO's LSH attention (Acos), and four
    # families that imported as they were
    _hf("yoso", "YosoConfig", "YosoModel", dict(_BERT, use_expectation=True)),
    _hf("nystromformer", "NystromformerConfig", "NystromformerModel",
        dict(_BERT, num_landmarks=8, segment_means_seq_len=8)),
    _hf("luke", "LukeConfig", "LukeModel", dict(_BERT, entity_vocab_size=10, entity_emb_size=16)),
    _hf("layoutlm", "LayoutLMConfig", "LayoutLMModel", _BERT),
    _hf("xglm", "XGLMConfig", "XGLMModel",
        dict(d_model=32, num_layers=2, attention_heads=2, ffn_dim=64, vocab_size=100,
             max_position_embeddings=64)),
    _hf("gemma3_text", "Gemma3TextConfig", "Gemma3TextModel",
        dict(_DECODER, head_dim=16, sliding_window=8)),
    # A fifth round (session of 2026-12-07 18:06): RAFT-small needed
    # GridSample, ViTMAE TopK (argsort of its masking noise, given as an
    # input), SwiftFormer a Tile of more than 64 copies, BiT a training-mode
    # BatchNormalization of its weights (weight standardisation: folded);
    # the rest matched as they were. SAM's default initializer_range (1e-10)
    # gives an output that ignores the input: 0.02 here. Tried and left out:
    # with torch's TorchScript exporter, PatchTST (its unfold exported with
    # the wrong axes: ONNX Runtime rejects the file), GLM and Helium (the
    # exporter fails) -- all three match with the dynamo one (--exporter
    # dynamo); MViT-V2 (SequenceEmpty / Loop / If) and MobileViT-V2
    # (aten::col2im: no opset 17 export) -- their dynamo exports (opset 18:
    # depthwise Conv on NCDHW, Col2Im) import and match since 2026-12-07
    # (docs/onnx.md); Reformer and FNet (aten::fft_fftn) do not export; DiNAT
    # needs the natten package.
    Entry("raft_small", "torchvision", _raft_small),
    _hf("cvt", "CvtConfig", "CvtModel",
        dict(embed_dim=[16, 32, 48], num_heads=[1, 2, 3], depth=[1, 2, 3]),
        inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("pvt", "PvtConfig", "PvtModel",
        dict(image_size=64, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
             num_attention_heads=[1, 1, 2, 2]), inputs="pixels"),
    _hf("pvt_v2", "PvtV2Config", "PvtV2Model",
        dict(image_size=64, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
             num_attention_heads=[1, 1, 2, 2]), inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("bit", "BitConfig", "BitModel",
        dict(embedding_size=16, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1], num_groups=8),
        inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("glpn", "GLPNConfig", "GLPNModel",
        dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32],
             patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2],
             mlp_ratios=[2, 2]), inputs=_randn("pixel_values", 1, 3, 32, 32)),
    _hf("ast", "ASTConfig", "ASTModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             patch_size=16, frequency_stride=10, time_stride=10, max_length=64,
             num_mel_bins=32), inputs=_ast_input),
    _hf("videomae", "VideoMAEConfig", "VideoMAEModel",
        dict(_VISION, num_frames=4, tubelet_size=2), inputs=_video_pixels),
    _hf("timesformer", "TimesformerConfig", "TimesformerModel",
        dict(_VISION, num_frames=4), inputs=_video_pixels),
    _hf("vivit", "VivitConfig", "VivitModel",
        dict(_VISION, num_frames=4, tubelet_size=[2, 8, 8]), inputs=_video_pixels),
    _hf("siglip_vision", "SiglipVisionConfig", "SiglipVisionModel", _VISION, inputs="pixels"),
    _hf("siglip_text", "SiglipTextConfig", "SiglipTextModel",
        dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             vocab_size=100, max_position_embeddings=64)),
    _hf("clap_text", "ClapTextConfig", "ClapTextModel", dict(_BERT, pad_token_id=1)),
    _hf("speech2text_encoder", "Speech2TextConfig", "Speech2TextModel",
        dict(_SEQ2SEQ, input_feat_per_channel=16, num_conv_layers=2, conv_channels=32,
             conv_kernel_sizes=(5, 5), max_source_positions=64), inputs=_s2t_input,
        encoder=True),
    _hf("convnext_hf", "ConvNextConfig", "ConvNextModel",
        dict(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], image_size=32),
        inputs="pixels"),
    _hf("regnet_hf", "RegNetConfig", "RegNetModel",
        dict(embedding_size=16, hidden_sizes=[16, 32, 32, 32], depths=[1, 1, 1, 1],
             groups_width=8), inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("data2vec_vision", "Data2VecVisionConfig", "Data2VecVisionModel",
        dict(_VISION, use_relative_position_bias=True), inputs="pixels"),
    _hf("owlvit_vision", "OwlViTVisionConfig", "OwlViTVisionModel", _VISION, inputs="pixels"),
    _hf("owlvit_text", "OwlViTTextConfig", "OwlViTTextModel",
        dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             vocab_size=100, max_position_embeddings=64)),
    _hf("blip_vision", "BlipVisionConfig", "BlipVisionModel", _VISION, inputs="pixels"),
    _hf("blip_text", "BlipTextConfig", "BlipTextModel",
        dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
             vocab_size=100, max_position_embeddings=64, encoder_hidden_size=32)),
    _hf("sam_vision", "SamVisionConfig", "SamVisionModel",
        dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, image_size=64,
             patch_size=8, output_channels=16, window_size=4, global_attn_indexes=[1],
             mlp_dim=64, initializer_range=0.02), inputs="pixels"),
    _hf("hiera", "HieraConfig", "HieraModel",
        dict(embed_dim=16, image_size=[64, 64], patch_stride=[4, 4], depths=[1, 1],
             num_heads=[1, 2], query_stride=[2, 2], masked_unit_size=[4, 4], num_query_pool=1),
        inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("yolos", "YolosConfig", "YolosModel",
        dict(_VISION, image_size=[32, 32], num_detection_tokens=4), inputs=_randn(
            "pixel_values", 1, 3, 32, 32)),
    _hf("vit_mae", "ViTMAEConfig", "ViTMAEModel", dict(_VISION, mask_ratio=0.5),
        inputs=_mae_input),
    _hf("efficientnet_hf", "EfficientNetConfig", "EfficientNetModel",
        dict(image_size=64, width_coefficient=0.25, depth_coefficient=0.25, hidden_dim=320),
        inputs="pixels"),
    _hf("swiftformer", "SwiftFormerConfig", "SwiftFormerModel",
        dict(depths=[1, 1, 1, 1], embed_dims=[16, 16, 32, 32]),
        inputs=_randn("pixel_values", 1, 3, 64, 64)),
    _hf("modernbert", "ModernBertConfig", "ModernBertModel",
        dict(_BERT, global_attn_every_n_layers=2, local_attention=8, pad_token_id=0,
             bos_token_id=1, eos_token_id=2, cls_token_id=1, sep_token_id=2)),
    _hf("mra", "MraConfig", "MraModel", dict(_BERT, max_position_embeddings=64)),
    _hf("wav2vec2_conformer", "Wav2Vec2ConformerConfig", "Wav2Vec2ConformerModel",
        dict(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
             conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3),
             num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
             conv_depthwise_kernel_size=7, position_embeddings_type="rotary"), inputs="audio"),
    _hf("olmo2", "Olmo2Config", "Olmo2Model", _DECODER),
]
BY_NAME = {e.name: e for e in HELDOUT}


def rel_err(got, want):
    want = np.asarray(want, np.float64)
    got = np.asarray(got, np.float64).reshape(want.shape)
    return float(np.abs(got - want).max()) / max(float(np.abs(want).max()), 1e-30)


def _first_error(text):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.lower().startswith("error")]
    return (errs[0] if errs else (lines[-1] if lines else "?"))[:200]


def check(name, workdir, exporter="legacy"):
    """(exported, import result, max relative error vs ORT or None) of one
    model at its small size (a held-out or a zoo model): export (torch's
    TorchScript exporter at opset 17, or its default dynamo one at 18),
    `hwtune import`, `hwtune run` on the example inputs beside ONNX
    Runtime."""
    import onnxruntime as ort
    from click.testing import CliRunner
    from hwtune.cli.main import cli

    os.makedirs(workdir, exist_ok=True)
    try:
        built = (BY_NAME.get(name) or Z.BY_NAME[name]).build(True)
        src = Z.export(built, os.path.join(workdir, f"{name}.onnx"), exporter=exporter,
                       opset=17 if exporter == "legacy" else 18)
    except Exception as e:  # torch's own failure: not hwtune's
        return f"no: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}", "-", None
    runner = CliRunner()
    res = runner.invoke(cli, ["import", src, "-o", os.path.join(workdir, f"{name}.json")])
    if res.exit_code != 0:
        return "yes", f"exit {res.exit_code}: {_first_error(res.output)}", None
    sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    # an input the model never reads (MRA's attention mask) is not in the export
    feeds = {i.name: built.inputs[i.name] for i in sess.get_inputs()}
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    flags = []
    for k, v in feeds.items():
        np.save(os.path.join(workdir, f"{name}.{k}.npy"), v)
        flags += ["--input", f"{k}={os.path.join(workdir, f'{name}.{k}.npy')}"]
    out = os.path.join(workdir, f"{name}.out.npz")
    res = runner.invoke(cli, ["run", src, *flags, "--save-outputs", out, "--iterations", "1",
                              "--warmup", "0", "--db", os.path.join(workdir, "r.db")])
    if res.exit_code != 0:
        return "yes", f"ok; run exit {res.exit_code}: {_first_error(res.output)}", None
    got = np.load(out)
    return "yes", "ok", max(rel_err(got[k], v) for k, v in want.items())


def main(argv=None):
    import argparse
    import tempfile
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", action="store_true", help="check every model, print the table")
    ap.add_argument("--only", default="", help="comma-separated names")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--exporter", choices=["legacy", "dynamo"], default="legacy",
                    help="torch.onnx.export's TorchScript exporter (opset 17) or its default "
                         "dynamo one (opset 18)")
    ap.add_argument("--zoo", action="store_true", help="the zoo's models too")
    a = ap.parse_args(argv)
    if not a.table:
        print("\n".join(e.name for e in HELDOUT))
        return 0
    names = [n for n in a.only.split(",") if n] or (
        [e.name for e in Z.ZOO] if a.zoo else []) + [e.name for e in HELDOUT]
    workdir = a.workdir or tempfile.mkdtemp(prefix="heldout-")
    os.environ.setdefault("HWTUNE_CACHE_DIR", os.path.join(workdir, "cache"))
    print(f"{'model':30s} {'exported':10s} {'max err vs ORT':>15s}  import")
    for n in names:
        exp, imp, err = check(n, workdir, a.exporter)
        e = "-" if err is None else f"{err:.2e}{'' if err <= TOL else ' WRONG'}"
        print(f"{n:30s} {exp[:10]:10s} {e:>15s}  {imp if exp == 'yes' else exp}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
