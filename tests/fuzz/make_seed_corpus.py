#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets into corpus/<target>/ (standard library only).

Run from anywhere: python3 tests/fuzz/make_seed_corpus.py. The output is committed; rerun it
only to change the seeds.
"""
import collections
import json
import os
import pickle
import struct
import sys
import types
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None, pad=True, data_extra=b""):
    """tensors: list of (name, dtype, shape, raw bytes), laid out in order."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data + data_extra


def raw_header(text, data=b""):
    text = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(text)) + text + data


def f32(*values):
    return struct.pack("<%df" % len(values), *values)


def write(target, name, content):
    directory = os.path.join(HERE, "corpus", target)
    os.makedirs(directory, exist_ok=True)
    mode = "wb" if isinstance(content, bytes) else "w"
    with open(os.path.join(directory, name), mode) as out:
        out.write(content)


def safetensors_seeds():
    t = "safetensors_header_fuzz"
    write(t, "valid_f32.safetensors", safetensors(
        [("a", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6)), ("b", "F32", [2], f32(7, 8))],
        metadata={"format": "pt"}))
    write(t, "valid_mixed_dtypes.safetensors", safetensors([
        ("bf16", "BF16", [2], struct.pack("<2H", 0x3F80, 0xC020)),
        ("f16", "F16", [3], struct.pack("<3H", 0x3C00, 0x0001, 0x7BFF)),
        ("f64", "F64", [1], struct.pack("<d", 0.1)),
        ("i64", "I64", [2], struct.pack("<2q", -1, 2**62)),
        ("scalar", "F32", [], f32(42.5)),
        ("empty", "F32", [0, 4], b""),
        ("u8", "U8", [3], b"\x00\x80\xff"),
        ("bool", "BOOL", [1], b"\x01"),
    ]))
    write(t, "valid_tiny_deberta.safetensors", safetensors([
        ("deberta.embeddings.word_embeddings.weight", "F32", [4, 2], f32(*range(8))),
        ("deberta.embeddings.LayerNorm.gamma", "F32", [2], f32(1, 1)),
        ("deberta.embeddings.LayerNorm.beta", "F32", [2], f32(0, 0)),
        ("deberta.encoder.rel_embeddings.weight", "F16", [4, 2], struct.pack("<8H", *range(8))),
        ("classifier.weight", "F32", [1, 2], f32(0.5, -0.5)),
        ("classifier.bias", "F32", [1], f32(0)),
    ], metadata={"format": "pt"}))
    write(t, "valid_unpadded_unsorted.safetensors", raw_header(
        '{"z":{"dtype":"I32","shape":[1],"data_offsets":[4,8]},'
        '"a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}}', b"\x01\x00\x00\x00\x02\x00\x00\x00"))
    write(t, "empty_header.safetensors", raw_header("{}"))
    write(t, "invalid_overlap.safetensors", raw_header(
        '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},'
        '"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}', bytes(16)))
    write(t, "invalid_truncated.safetensors", safetensors(
        [("w", "F32", [4], f32(1, 2, 3, 4))])[:-5])
    write(t, "invalid_header_past_end.safetensors", struct.pack("<Q", 1000) + b"{}")
    write(t, "invalid_shape_overflow.safetensors", raw_header(
        '{"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}}', bytes(16)))
    write(t, "invalid_size_mismatch.safetensors", raw_header(
        '{"w":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}}', bytes(8)))
    write(t, "invalid_metadata.safetensors", raw_header('{"__metadata__":{"format":1}}'))
    write(t, "invalid_duplicate.safetensors", raw_header(
        '{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
        '"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}', b"\x01\x02"))
    write(t, "invalid_short.safetensors", b"\x02\x00\x00")


def config_seeds():
    t = "model_config_fuzz"
    v3_base = {
        "model_type": "deberta-v2", "attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
        "intermediate_size": 3072, "max_position_embeddings": 512, "relative_attention": True,
        "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True,
        "pos_att_type": "p2c|c2p", "layer_norm_eps": 1e-7, "max_relative_positions": -1,
        "position_biased_input": False, "num_attention_heads": 12, "num_hidden_layers": 12,
        "type_vocab_size": 0, "vocab_size": 128100}
    write(t, "deberta_v3_base.json", json.dumps(v3_base, indent=2))
    classifier = dict(v3_base, architectures=["DebertaV2ForSequenceClassification"],
                      id2label={"0": "contradiction", "1": "entailment", "2": "neutral"},
                      label2id={"contradiction": 0, "entailment": 1, "neutral": 2},
                      problem_type="single_label_classification", torch_dtype="float32")
    write(t, "nli_classifier.json", json.dumps(classifier, indent=2))
    write(t, "token_classifier.json", json.dumps(dict(
        v3_base, architectures=["DebertaV2ForTokenClassification"], num_labels=5)))
    write(t, "v2_xlarge_conv.json", json.dumps({
        "model_type": "deberta-v2", "attention_head_size": 64, "conv_act": "gelu",
        "conv_kernel_size": 3, "hidden_act": "gelu", "hidden_size": 1536,
        "intermediate_size": 6144, "max_position_embeddings": 512, "max_relative_positions": -1,
        "norm_rel_ebd": "layer_norm", "num_attention_heads": 24, "num_hidden_layers": 24,
        "pad_token_id": 0, "pooler_hidden_act": "gelu", "pooler_hidden_size": 1536,
        "pos_att_type": ["p2c", "c2p"], "position_biased_input": False, "position_buckets": 256,
        "relative_attention": True, "share_att_key": True, "type_vocab_size": 0,
        "vocab_size": 128100}, indent=2))
    write(t, "legacy_unshared.json", json.dumps({
        "model_type": "deberta-v2", "hidden_size": 64, "num_attention_heads": 4,
        "num_hidden_layers": 2, "intermediate_size": 128, "embedding_size": 48,
        "relative_attention": True, "max_relative_positions": 32, "pos_att_type": "c2p|p2c",
        "type_vocab_size": 2, "position_biased_input": True, "vocab_size": 1000}))
    write(t, "tiny_buckets.json", json.dumps({
        "model_type": "deberta-v2", "architectures": ["DebertaV2ForSequenceClassification"],
        "vocab_size": 50, "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "intermediate_size": 16, "relative_attention": True, "position_buckets": 4,
        "max_relative_positions": 8, "pos_att_type": ["p2c", "c2p"], "share_att_key": True,
        "norm_rel_ebd": "layer_norm", "position_biased_input": False,
        "id2label": {"0": "NEG", "1": "POS"}}))
    write(t, "defaults_only.json", '{"model_type": "deberta-v2"}')
    write(t, "invalid_bert.json", '{"model_type": "bert", "hidden_size": 768}')
    write(t, "invalid_types.json", '{"model_type": "deberta-v2", "hidden_size": "768"}')
    write(t, "invalid_buckets.json", json.dumps({
        "model_type": "deberta-v2", "relative_attention": True, "position_buckets": 256,
        "max_relative_positions": 129}))
    write(t, "invalid_labels.json", '{"model_type": "deberta-v2", "id2label": {"0": "a", "2": "c"}}')
    write(t, "invalid_syntax.json", '{"model_type": "deberta-v2",\n "hidden_size": }')
    write(t, "invalid_duplicate_key.json", '{"model_type": "deberta-v2", "a": {"b": 1, "b": 2}}')


def varint(value):
    value &= (1 << 64) - 1
    out = b""
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


def field(number, value):
    """One protobuf field: int -> varint, str/bytes -> length-delimited."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    raw = value.encode() if isinstance(value, str) else value
    return varint((number << 3) | 2) + varint(len(raw)) + raw


def request_seeds():
    """request_message_fuzz: one selector byte (0 Classify, 1 ZeroShot, 2 Rerank, 3 Embed,
    4 Tokenize, 5 TokenClassify) and a dflash.v1 request message (field numbers of proto/dflash/v1/dflash.proto)."""
    t = "request_message_fuzz"
    text_input = field(1, "A man is playing a guitar.") + field(2, "Someone plays music.")
    write(t, "classify_pair.bin", b"\x00" + field(1, "demo") + field(10, text_input)
          + field(11, 1) + field(12, 2))
    write(t, "classify_options.bin", b"\x00" + field(1, "demo") + field(3, 3) + field(4, 0)
          + field(5, 2) + field(6, 3) + field(10, field(1, "x " * 200)))
    write(t, "classify_bad_enum.bin", b"\x00" + field(1, "demo") + field(3, 9)
          + field(10, field(1, "text")))
    write(t, "classify_invalid_utf8.bin", b"\x00" + field(10, field(1, b"bad \xc3\x28 text")))
    write(t, "zero_shot.bin", b"\x01" + field(1, "demo") + field(10, "The match ended 2-1.")
          + field(11, "sports") + field(11, "politics") + field(12, "It is about {}.")
          + field(13, 1))
    write(t, "zero_shot_template.bin", b"\x01" + field(10, "text") + field(11, "label")
          + field(12, "{} {}"))
    write(t, "rerank.bin", b"\x02" + field(1, "demo") + field(10, "query")
          + field(11, "document one") + field(11, "document two") + field(13, 1))
    write(t, "embed.bin", b"\x03" + field(1, "demo") + field(10, "a sentence") + field(12, 8))
    write(t, "tokenize.bin", b"\x04" + field(1, "demo") + field(4, 0)
          + field(10, field(1, "Hello world " * 50) + field(2, "pair")) + field(11, 0))
    write(t, "token_classify.bin", b"\x05" + field(1, "demo") + field(10, "Ada Lovelace in Paris")
          + field(10, "") + field(11, 3) + field(13, 1))
    write(t, "token_classify_ignore.bin", b"\x05" + field(10, "x y z " * 30) + field(11, 2)
          + field(12, "O") + field(12, "B-PER") + field(4, 1))
    write(t, "huge_length_prefix.bin", b"\x00\x0a\xff\xff\xff\xff\x0fabc")
    write(t, "unknown_fields.bin", b"\x04" + field(99, "ignored") + field(10, field(1, "t")))


def kserve_seeds():
    """kserve_infer_fuzz: a KServe v2 ModelInferRequest (field numbers of
    proto/inference/grpc_service.proto); BYTES inputs typed or raw (4-byte little-endian length
    before each element)."""
    t = "kserve_infer_fuzz"

    def raw(*elements):
        return b"".join(struct.pack("<I", len(e.encode())) + e.encode() for e in elements)

    def tensor(name, count, contents=None):
        out = field(1, name) + field(2, "BYTES") + field(3, count)
        if contents is not None:
            out += field(5, b"".join(field(8, c) for c in contents))
        return out

    def parameter(key, value):
        return field(1, key) + field(2, value)

    write(t, "classify_raw.bin", field(1, "demo") + field(3, "id-1") + field(5, tensor("text", 2))
          + field(7, raw("A man is playing a guitar.", "short")) + field(6, field(1, "scores"))
          + field(6, field(1, "logits")))
    write(t, "classify_pair_typed.bin", field(1, "demo")
          + field(5, tensor("text", 1, ["The match ended 2-1."]))
          + field(5, tensor("text_pair", 1, ["It was a game."]))
          + field(4, parameter("score_function", field(3, "sigmoid")))
          + field(4, parameter("truncate", field(1, 0))))
    write(t, "zero_shot.bin", field(1, "demo") + field(5, tensor("text", 1))
          + field(5, tensor("candidate_labels", 2)) + field(7, raw("The match ended."))
          + field(7, raw("sports", "politics")) + field(4, parameter("multi_label", field(1, 1)))
          + field(4, parameter("hypothesis_template", field(3, "About {}."))))
    write(t, "bad_raw_length.bin", field(1, "demo") + field(5, tensor("text", 1))
          + field(7, b"\xff\xff\xff\x7fabc"))
    write(t, "wrong_datatype.bin", field(1, "demo")
          + field(5, field(1, "text") + field(2, "FP32") + field(3, 1)))


def http_seeds():
    """http_request_fuzz: one selector byte (0 TEI /embed, 1 /predict, 2 /rerank, 3 /tokenize,
    4 /zero_shot, 5 OpenAI /v1/embeddings, 6 Cohere /v1/rerank, 7 the router on "METHOD path",
    8 /token_classify, 9 /decode) and the JSON body (or the request line)."""
    t = "http_request_fuzz"
    seeds = {
        "embed.bin": (0, {"inputs": ["a", "b"], "normalize": False, "truncate": True,
                          "truncation_direction": "Left", "dimensions": 8}),
        "predict_single.bin": (1, {"inputs": "a text", "raw_scores": True}),
        "predict_pair.bin": (1, {"inputs": ["a", "b"]}),
        "predict_batch.bin": (1, {"inputs": [["a"], ["b", "c"]], "model": "demo"}),
        "predict_inference_api.bin": (1, {"inputs": "x", "parameters": {
            "top_k": 2, "function_to_apply": "sigmoid"}}),
        "rerank.bin": (2, {"query": "q", "texts": ["d1", "d2"], "return_text": True}),
        "tokenize.bin": (3, {"inputs": ["h\u00e9llo", ""], "add_special_tokens": False}),
        "zero_shot.bin": (4, {"inputs": ["t"], "candidate_labels": ["x", "y"],
                              "hypothesis_template": "It is {}.", "multi_label": True}),
        "openai.bin": (5, {"model": "m", "input": ["a"], "encoding_format": "base64",
                           "dimensions": 4, "user": "u"}),
        "openai_tokens.bin": (5, {"input": [[1, 2], [3]]}),
        "openai_token_list.bin": (5, {"input": [101, 7, -1, 2147483647]}),
        "embed_token_ids.bin": (0, {"inputs": ["a", [1, 2, 3], []], "truncate": False}),
        "embed_one_id_list.bin": (0, {"inputs": [1, 2, 4294967296, 1.5]}),
        "decode.bin": (9, {"ids": [1, 5, 2], "skip_special_tokens": False}),
        "decode_batch.bin": (9, {"ids": [[1, 2], [3], []], "model": "m"}),
        "token_classify.bin": (8, {"inputs": ["Ada in London", "x"],
                                   "aggregation_strategy": "simple", "ignore_labels": ["O"]}),
        "token_classify_inference_api.bin": (8, {"inputs": "Z\u00fcrich", "parameters": {
            "aggregation_strategy": "none", "ignore_labels": [], "stride": None}}),
        "cohere.bin": (6, {"model": "m", "query": "q", "documents": ["a", {"text": "b"}],
                           "top_n": 1, "return_documents": True}),
    }
    for name, (selector, body) in seeds.items():
        write(t, name, bytes([selector]) + json.dumps(body).encode())
    write(t, "malformed.bin", b"\x01{\"inputs\": [")
    write(t, "nested.bin", b"\x00" + b"[" * 40 + b"]" * 40)
    write(t, "route_model.bin", b"\x07POST /models/embed/embed")
    write(t, "route_openai.bin", b"\x07GET /v1/models/x")
    write(t, "route_bad.bin", b"\x07DELETE /models//")
    write(t, "route_decode.bin", b"\x07POST /models/embed/decode")


class _FakeTorch:
    """Stand-ins for the torch objects a state dict pickles, so that Python's own pickler writes
    data.pkl exactly as torch.save does (torch is not needed): storages pickle as torch's
    persistent ids, tensors reduce to torch._utils._rebuild_tensor_v2."""

    def __init__(self):
        self.torch = types.ModuleType("torch")
        self.utils = types.ModuleType("torch._utils")
        self.torch._utils = self.utils
        for name in ("FloatStorage", "HalfStorage", "BFloat16Storage", "LongStorage"):
            setattr(self.torch, name, type(name, (), {"__module__": "torch"}))

        def _rebuild_tensor_v2(*args):
            raise AssertionError("never called")

        _rebuild_tensor_v2.__module__ = "torch._utils"
        _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
        self.utils._rebuild_tensor_v2 = _rebuild_tensor_v2
        sys.modules.setdefault("torch", self.torch)
        sys.modules.setdefault("torch._utils", self.utils)


class _Storage:
    def __init__(self, type_name, key, raw, itemsize):
        self.type_name, self.key, self.raw, self.numel = type_name, key, raw, len(raw) // itemsize


class _Tensor:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride

    def __reduce_ex__(self, protocol):
        # Fresh size and stride tuples each time, as tuple(tensor.size()) and tensor.stride()
        # are, so that the pickler memoizes none of them across tensors.
        return (sys.modules["torch._utils"]._rebuild_tensor_v2,
                (self.storage, self.offset, tuple(list(self.size)), tuple(list(self.stride)),
                 False, collections.OrderedDict()))


class _TorchPickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            # torch.save: ("storage", storage_type, key, location, numel); "cpu" is one object.
            return ("storage", getattr(sys.modules["torch"], obj.type_name), obj.key, "cpu",
                    obj.numel)
        return None


def torch_pickle(state_dict):
    _FakeTorch()
    buffer = __import__("io").BytesIO()
    _TorchPickler(buffer, protocol=2).dump(state_dict)
    return buffer.getvalue()


def torch_zip(archive, records):
    """records: (name, bytes) in torch.save's order, stored, under archive/."""
    buffer = __import__("io").BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as out:
        for name, content in records:
            info = zipfile.ZipInfo(archive + "/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            out.writestr(info, content)
    return buffer.getvalue()


def torch_layout_zip(archive, records):
    """records as for torch_zip, laid out as PyTorch's writer (miniz) does: each record's data
    64-byte aligned by an "FB" extra field, zip64 end records before the classic one."""
    out, directory = b"", b""
    for name, content in records:
        name = (archive + "/" + name).encode()
        offset = len(out)
        padding = -(offset + 30 + len(name) + 4) % 64
        crc = __import__("zlib").crc32(content)
        common = struct.pack("<HHHHIIIH", 0, 0, 0, 0x2100, crc, len(content), len(content),
                             len(name))
        out += (struct.pack("<IH", 0x04034B50, 0) + common + struct.pack("<H", 4 + padding)
                + name + b"FB" + struct.pack("<H", padding) + b"Z" * padding + content)
        directory += (struct.pack("<IHH", 0x02014B50, 0x031E, 0) + common
                      + struct.pack("<HHHHII", 0, 0, 0, 0, 0, offset) + name)
    start, count = len(out), len(records)
    out += directory
    end64 = len(out)
    out += struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 0x031E, 45, 0, 0, count, count,
                       len(directory), start)
    out += struct.pack("<IIQI", 0x07064B50, 0, end64, 1)
    out += struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(directory), start, 0)
    return out


def torch_state_dict():
    """The state dict of tests/engine/model/torch_checkpoint_test.cc's PickleMatchesPythonsPickler: a
    module's state_dict() (an OrderedDict with _metadata) with a shared storage and an offset
    view, plus an F16 storage."""
    floats = _Storage("FloatStorage", "0", f32(*[0.5 * i for i in range(6)]), 4)
    halves = _Storage("HalfStorage", "1", struct.pack("<2H", 0x3C00, 0xC000), 2)
    state = collections.OrderedDict()
    state["deberta.embeddings.word_embeddings.weight"] = _Tensor(floats, 0, (2, 3), (3, 1))
    state["tied.weight"] = _Tensor(floats, 0, (2, 3), (3, 1))
    state["deberta.embeddings.LayerNorm.bias"] = _Tensor(floats, 3, (3,), (1,))
    state["classifier.bias"] = _Tensor(halves, 0, (2,), (1,))
    state._metadata = collections.OrderedDict([("", {"version": 1})])
    return state, [floats, halves]


def torch_seeds():
    p = "torch_pickle_fuzz"
    z = "zip_archive_fuzz"
    state, storages = torch_state_dict()
    data_pkl = torch_pickle(state)
    write(p, "state_dict_ordered_metadata.pkl", data_pkl)
    plain = dict(state)
    write(p, "state_dict_plain_dict.pkl", torch_pickle(plain))
    write(p, "invalid_os_system.pkl", b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.")
    write(p, "invalid_truncated.pkl", data_pkl[:len(data_pkl) // 2])
    write(p, "invalid_memo.pkl", b"\x80\x02j\xff\xff\xff\xff.")

    records = [("data.pkl", data_pkl), (".format_version", b"1"), (".storage_alignment", b"64"),
               ("byteorder", b"little")]
    records += [("data/" + s.key, s.raw) for s in storages]
    records += [("version", b"3\n"), (".data/serialization_id", b"0" * 40)]
    archive = torch_zip("pytorch_model", records)
    write(z, "pytorch_model.bin", archive)
    write(z, "torch_layout_zip64.bin", torch_layout_zip("pytorch_model", records))
    write(z, "no_byteorder.bin", torch_zip("archive", [r for r in records if r[0] != "byteorder"]))
    deflated = __import__("io").BytesIO()
    with zipfile.ZipFile(deflated, "w", zipfile.ZIP_DEFLATED) as out:
        for name, content in records:
            out.writestr(zipfile.ZipInfo("model/" + name, date_time=(1980, 1, 1, 0, 0, 0)),
                         content, compress_type=zipfile.ZIP_DEFLATED)
    write(z, "deflated.bin", deflated.getvalue())
    write(z, "invalid_truncated.bin", archive[:len(archive) - 30])
    write(z, "invalid_legacy.bin", b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19.")
    write(z, "invalid_os_system.bin", torch_zip("x", [("data.pkl", (
        b"\x80\x02cos\nsystem\nq\x00X\x02\x00\x00\x00lsq\x01\x85q\x02Rq\x03.")),
        ("version", b"3\n")]))


# A precompiled_charsmap small enough for a seed: what sentencepiece's trainer compiles from the
# normalization rules FF21 -> 41, FB01 -> 66 69, 3000 -> 20, 2126 -> 3A9, 212B -> C5.
SMALL_CHARSMAP = (
    "AAQAAACAAwCEjAIA4hwCAOMQAgCmBQAACgAAgAcAAICAPAIAgAkAAKs9AAAAAACArBgCAIEFAAAEAACAoXkAAO+g"
    "AgACAACAEAAAABMAAAASAAAAFQAAABQAAAAXAAAAFgAAABkAAAAYAAAAGwAAALzQAgAdAAAAHAAAAB8AAAAeAAAA"
    "IQAAACAAAAAjAAAAIgAAACUAAAAkAAAAJwAAACYAAAApAAAAKAAAACsAAAAqAAAALQAAACwAAAAvAAAALgAAADEA"
    "AAAwAAAAMwAAADIAAAA1AAAANAAAADcAAAA2AAAAOQAAADgAAAA7AAAAOgAAAD0AAAA8AAAAPwAAAD4AAABBAAAA"
    "QAAAAEMAAABCAAAARQAAAEQAAABHAAAARgAAAEkAAABIAAAASwAAAEoAAABNAAAATAAAAE8AAABOAAAAUQAAAFAA"
    "AABTAAAAUgAAAFUAAABUAAAAVwAAAFYAAABZAAAAWAAAAFsAAABaAAAAXQAAAFwAAABfAAAAXgAAAGEAAABgAAAA"
    "YwAAAGIAAABlAAAAZAAAAGcAAABmAAAAaQAAAGgAAABrAAAAagAAAG0AAABsAAAAbwAAAG4AAABxAAAAcAAAAHMA"
    "AAByAAAAdQAAAHQAAAB3AAAAdgAAAHkAAAB4AAAAewAAAHoAAAB9AAAAfAAAAH8AAAB+AAAAgQAAAIAAAACDAAAA"
    "ggAAAIUAAACEAAAAhwAAAIYAAACJAAAAiAAAAIsAAACKAAAAjQAAAIwAAACPAAAAjgAAAJEAAACQAAAAkwAAAJIA"
    "AACVAAAAlAAAAJcAAACWAAAAmQAAAJgAAACbAAAAmgAAAJ0AAACcAAAAnwAAAJ4AAAChAAAAoAAAAKMAAACiAAAA"
    "pQAAAKQAAACnAAAApgAAAKkAAACoAAAAqwAAAKoAAACtAAAArAAAAK8AAACuAAAAsQAAALAAAACzAAAAsgAAALUA"
    "AAC0AAAAtwAAALYAAAC5AAAAuAAAALsAAAC6AAAAvQAAALwAAAC/AAAAvgAAAMEAAADAAAAAwwAAAMIAAADFAAAA"
    "xAAAAMcAAADGAAAAyQAAAMgAAADLAAAAygAAAM0AAADMAAAAzwAAAM4AAADRAAAA0AAAANMAAADSAAAA1QAAANQA"
    "AADXAAAA1gAAANkAAADYAAAA2wAAANoAAADdAAAA3AAAAN8AAADeAAAA4QAAAOAAAADjAAAA4gAAAOUAAADkAAAA"
    "5wAAAOYAAADpAAAA6AAAAOsAAADqAAAA7QAAAOwAAADvAAAA7gAAAPEAAADwAAAA8wAAAPIAAAD1AAAA9AAAAPcA"
    "AAD2AAAA+QAAAPgAAAD7AAAA+gAAAP0AAAD8AAAA/wAAAP4AAAAgAEEAZmkAw4UAzqkA")


def tokenizer_json(vocab, normalizer=None, pre_tokenizer=None, post_processor="template",
                   added_tokens=None, unk_id=3, byte_fallback=False, model_type="Unigram"):
    """A tokenizer.json as tokenizers writes it, with a small Unigram vocabulary."""
    specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]"]
    pieces = [[t, 0.0] for t in specials] + [[p, -1.0 - i / 10] for i, p in enumerate(vocab)]
    if added_tokens is None:
        added_tokens = [dict(id=i, content=t, single_word=False, lstrip=False, rstrip=False,
                             normalized=False, special=True) for i, t in enumerate(specials)]
        added_tokens.append(dict(id=len(pieces), content="[MASK]", single_word=False,
                                 lstrip=False, rstrip=False, normalized=False, special=True))
    if post_processor == "template":
        post_processor = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [1], "tokens": ["[CLS]"]},
                               "[SEP]": {"id": "[SEP]", "ids": [2], "tokens": ["[SEP]"]}}}
    return json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added_tokens,
        "normalizer": normalizer, "pre_tokenizer": pre_tokenizer,
        "post_processor": post_processor,
        "decoder": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                    "split": True},
        "model": {"type": model_type, "unk_id": unk_id, "vocab": pieces,
                  "byte_fallback": byte_fallback}}, ensure_ascii=False)


def tokenizer_json_seeds():
    t = "tokenizer_json_fuzz"
    words = ["\u2581the", "\u2581a", "\u2581hello", "\u2581world", "\u2581fi", "nance", "\u2581",
             "s", "e", "a", "o", ",", ".", "!", "\u2581caf", "\u00e9", "\u6f22", "\u5b57",
             "\u2581[", "MASK", "]"]
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
                 "split": True}
    hf5 = {"type": "Sequence", "normalizers": [
        {"type": "Replace", "pattern": {"Regex": "\\s{2,}|[\\n\\r\\t]"}, "content": " "},
        {"type": "NFC"}, {"type": "Strip", "strip_left": False, "strip_right": True}]}
    write(t, "hf5.json", tokenizer_json(words, hf5, {"type": "Sequence",
                                                     "pretokenizers": [metaspace]}))
    lower_punct = {"type": "Sequence", "normalizers": [{"type": "Lowercase"}] +
                   hf5["normalizers"]}
    write(t, "hf5_lower_punct.json", tokenizer_json(words, lower_punct, {
        "type": "Sequence", "pretokenizers": [{"type": "Punctuation", "behavior": "Isolated"},
                                              metaspace]}))
    hf4 = {"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Precompiled", "precompiled_charsmap": SMALL_CHARSMAP},
        {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]}
    added = [dict(id=i, content=c, single_word=False, lstrip=False, rstrip=False,
                  normalized=c == "[UNK]", special=True)
             for i, c in enumerate(["[PAD]", "[CLS]", "[SEP]", "[UNK]"])]
    added.append(dict(id=25, content="[MASK]", single_word=False, lstrip=True, rstrip=True,
                      normalized=False, special=True))
    added.append(dict(id=26, content="hello", single_word=True, lstrip=False, rstrip=False,
                      normalized=True, special=False))
    write(t, "hf4_precompiled.json", tokenizer_json(
        words, hf4, {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": True},
        added_tokens=added))
    write(t, "unicode_forms.json", tokenizer_json(words, {"type": "Sequence", "normalizers": [
        {"type": "NFKD"}, {"type": "NFD"}, {"type": "NFKC"},
        {"type": "Replace", "pattern": {"String": "\u00e9"}, "content": "e"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {
            "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
            "split": False}]}))
    write(t, "byte_fallback.json", tokenizer_json(
        words + ["<0x%02X>" % b for b in range(256)], None, metaspace, byte_fallback=True,
        post_processor=None))
    write(t, "no_unk.json", tokenizer_json(words, None, metaspace, unk_id=None))
    write(t, "invalid_bpe.json", tokenizer_json(words, model_type="BPE"))
    write(t, "invalid_bert_normalizer.json", tokenizer_json(words, {"type": "BertNormalizer"}))
    write(t, "invalid_lookahead_regex.json", tokenizer_json(words, {
        "type": "Replace", "pattern": {"Regex": "(?=a)b"}, "content": ""}))
    nested = {"type": "NFC"}
    for _ in range(12):
        nested = {"type": "Sequence", "normalizers": [nested]}
    write(t, "invalid_deep_sequence.json", tokenizer_json(words, nested))
    write(t, "invalid_syntax.json", '{"version": "1.0", "model": {"type": "Unigram", "vocab": [')


if __name__ == "__main__":
    safetensors_seeds()
    config_seeds()
    request_seeds()
    kserve_seeds()
    http_seeds()
    torch_seeds()
    tokenizer_json_seeds()
