"""CPU tests of dflash_torch: no GPU, no kernel launches.

They cover the Python side: the slot table against transformers, packing, the ops' fake
implementations and torch.compile tracing, tuning-profile selection, optimize_deberta's module
surgery and fallback decisions, and the whole integration (padded and packed, ConvLayer, c2p /
p2c / both / none) against stock transformers with the ops' plain-torch reference registered as
their CPU kernel. Run: python -m pytest python/tests (or python -m unittest discover).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import os
import pickle
import sys
import unittest
import warnings
from unittest import mock
from pathlib import Path

import torch

try:  # the installed package (the GPU run tests the wheel), else the source tree
    import dflash_torch  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import dflash_torch  # noqa: E402
from dflash_torch import (_native, deberta, encoder_graphs, layer_tail, ops,  # noqa: E402
                          packing, profiles, projections, reference)
from dflash_torch.relative_positions import (PositionSettings, build_slot_table,  # noqa: E402
                                             slot_indices)
from transformers import DebertaV2Config  # noqa: E402
from transformers import (DebertaV2ForSequenceClassification,  # noqa: E402
                          DebertaV2ForTokenClassification, DebertaV2Model)
from transformers.models.deberta_v2 import modeling_deberta_v2  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[2]


def small_config(**overrides) -> DebertaV2Config:
    """A deberta-v3-shaped config, scaled down (hidden 64, 2 heads of 32)."""
    values = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=96, max_position_embeddings=64, relative_attention=True,
                  position_buckets=16, max_relative_positions=-1, pos_att_type=["p2c", "c2p"],
                  share_att_key=True, norm_rel_ebd="layer_norm", position_biased_input=False,
                  type_vocab_size=0, num_labels=3, hidden_dropout_prob=0.1,
                  attention_probs_dropout_prob=0.1)
    values.update(overrides)
    return DebertaV2Config(**values)


def make_model(cls=DebertaV2ForSequenceClassification, seed=0, **overrides):
    torch.manual_seed(seed)
    return cls(small_config(**overrides)).eval()


def batch(lengths, length, seed=1, left=False):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 100, (len(lengths), length), generator=generator)
    mask = torch.zeros(len(lengths), length, dtype=torch.long)
    for row, n in enumerate(lengths):
        if left:
            mask[row, length - n:] = 1
        else:
            mask[row, :n] = 1
    return ids * mask, mask


class KernelOnCpu:
    """Lets the integration take its kernel path on CPU tensors, with the reference kernels."""

    def __enter__(self):
        reference.use_reference_on_cpu()
        self._devices = deberta._KERNEL_DEVICES
        deberta._KERNEL_DEVICES = ("cpu", "meta")
        return self

    def __exit__(self, *exc):
        deberta._KERNEL_DEVICES = self._devices


def relative_l2(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm())


class SlotTableTest(unittest.TestCase):
    def check_against_transformers(self, buckets: int, max_relative: int, span: int):
        settings = PositionSettings(span=span, position_buckets=buckets,
                                    max_relative_positions=max_relative)
        table = build_slot_table(settings)
        self.assertTrue(table.settled)
        length = 3 * max(table.band, 8)
        q = torch.zeros(1, length, 1)
        relative = modeling_deberta_v2.build_relative_position(q, q, bucket_size=buckets,
                                                               max_position=max_relative)[0]
        stock = torch.clamp(relative + span, 0, 2 * span - 1)
        positions = torch.arange(length)
        delta = positions[:, None] - positions[None, :]
        ours = torch.tensor([table.lookup(int(d)) for d in delta.flatten()]).view(length, length)
        self.assertTrue(torch.equal(ours, stock))
        # p2c reads clamp(-bucket(j - i) + span) at (i, j): the same slot (bucket is odd).
        p2c = torch.clamp(-relative.t() + span, 0, 2 * span - 1)
        self.assertTrue(torch.equal(ours, p2c))

    def test_v3_buckets_match_transformers(self):
        self.check_against_transformers(buckets=256, max_relative=512, span=256)

    def test_small_buckets_match_transformers(self):
        self.check_against_transformers(buckets=16, max_relative=64, span=16)

    def test_no_buckets_match_transformers(self):
        self.check_against_transformers(buckets=-1, max_relative=24, span=24)

    def test_v3_band(self):
        table = build_slot_table(PositionSettings(span=256, position_buckets=256,
                                                  max_relative_positions=512))
        self.assertEqual(table.band, 512)  # engine/model/relative_position.h: v3 settles at 512
        self.assertEqual(len(table.table), 1025)
        self.assertEqual(table.lookup(10_000), 511)
        self.assertEqual(table.lookup(-10_000), 0)

    def test_slot_indices_are_clamped(self):
        settings = PositionSettings(span=4, position_buckets=-1, max_relative_positions=4)
        got = slot_indices(torch.tensor([-9, -4, 0, 3, 9]), settings)
        self.assertEqual(got.tolist(), [0, 0, 4, 7, 7])


class PackingTest(unittest.TestCase):
    def test_round_trip_right_padding(self):
        _, mask = batch([5, 1, 7], 8)
        hidden = torch.randn(3, 8, 4)
        layout, packed = packing.pack_batch(mask, hidden)
        self.assertEqual(layout.cu_seqlens.tolist(), [0, 5, 6, 13])
        self.assertEqual(layout.max_seqlen, 7)
        self.assertEqual(packed.shape, (13, 4))
        restored = packing.unpack(packed, layout)
        self.assertTrue(torch.equal(restored, hidden * mask.unsqueeze(-1)))

    def test_round_trip_left_padding(self):
        _, mask = batch([2, 6], 6, left=True)
        hidden = torch.randn(2, 6, 3)
        layout, packed = packing.pack_batch(mask, hidden)
        self.assertEqual(layout.cu_seqlens.tolist(), [0, 2, 8])
        self.assertTrue(torch.equal(packed[:2], hidden[0, 4:]))
        self.assertTrue(torch.equal(packing.unpack(packed, layout, fill=0.0),
                                    hidden * mask.unsqueeze(-1)))

    def test_empty_sequence(self):
        mask = torch.tensor([[1, 1, 0], [0, 0, 0], [1, 0, 0]])
        layout = packing.packed_layout(mask)
        self.assertEqual(layout.cu_seqlens.tolist(), [0, 2, 2, 3])
        self.assertEqual(layout.total_tokens, 3)

    def test_gaps_are_refused(self):
        with self.assertRaisesRegex(ValueError, "not contiguous"):
            packing.packed_layout(torch.tensor([[1, 0, 1, 0]]))


    def test_unpack_all_equals_unpack_of_each(self):
        _, mask = batch([5, 1, 7], 8)
        layout = packing.packed_layout(mask)
        packed = [torch.randn(13, 4) for _ in range(3)]
        got = packing.unpack_all(packed, layout, fill=-1.0)
        self.assertEqual(len(got), 3)
        for ours, one in zip(got, packed):
            self.assertTrue(ours.is_contiguous())
            self.assertTrue(torch.equal(ours, packing.unpack(one, layout, fill=-1.0)))
        for states in (packed, torch.stack(packed), packed[:1]):
            layers = packing.unpack_layers(states, layout)
            self.assertEqual(len(layers), len(states))
            for ours, one in zip(layers, states):
                self.assertTrue(torch.equal(ours, packing.unpack(one, layout)))
            # The last layer's states hold no other layer's memory.
            storages = [t.untyped_storage() for t in layers]
            self.assertEqual(storages[-1].nbytes(), layers[-1].nbytes)
            if len(layers) > 2:
                self.assertEqual(len({s.data_ptr() for s in storages[:-1]}), 1)

    def test_fixed_shape_layout_equals_the_layout_plus_extra_sequences(self):
        cases = (([5, 1, 7], 9, False), ([2, 6, 0], 8, True), ([8, 8], 9, False))
        for lengths, length, left in cases:
            _, mask = batch(lengths, length, left=left)
            exact = packing.packed_layout(mask)
            count = exact.total_tokens
            for tokens, extra in ((count, 0), (count + 3, 1), (count + 11, 3)):
                got = packing.fixed_shape_layout(mask, tokens, 8, extra)
                message = f"{lengths} left={left} tokens={tokens}"
                self.assertEqual((got.batch, got.length, got.max_seqlen), (len(lengths), length, 8))
                self.assertTrue(torch.equal(got.index[:count], exact.index), message)
                self.assertTrue(torch.all(got.index[count:] == len(lengths) * length - 1), message)
                bounds = got.cu_seqlens.tolist()
                self.assertEqual(got.cu_seqlens.dtype, torch.int32)
                self.assertEqual(bounds[:len(lengths) + 1], exact.cu_seqlens.tolist(), message)
                self.assertEqual(len(bounds), len(lengths) + 1 + extra, message)
                self.assertEqual(bounds[-1], tokens, message)
                sizes = [b - a for a, b in zip(bounds[:-1], bounds[1:])]
                self.assertTrue(all(0 <= n <= 8 for n in sizes[len(lengths):]), message)

    def test_fixed_shape_layout_stays_inside_its_bounds(self):
        # A mask with longer rows and more tokens than the bounds given (a layout handed in
        # that is not the mask's): sequences are cut, never past `tokens` or `longest`.
        _, mask = batch([9, 7, 9], 10)
        got = packing.fixed_shape_layout(mask, 12, 8, 1)
        bounds = got.cu_seqlens.tolist()
        self.assertEqual(bounds, [0, 8, 12, 12, 12])
        self.assertTrue(bool(((got.index >= 0) & (got.index < 30)).all()))


def fake_packed_inputs():
    """q [40, 12 x 64], pos [512, 768], a slot table and cu_seqlens of 3 sequences, fp16 on CUDA:
    call inside a FakeTensorMode (no device needed)."""
    return (torch.empty(40, 768, device="cuda", dtype=torch.float16),
            torch.empty(512, 768, device="cuda", dtype=torch.float16),
            torch.empty(1025, device="cuda", dtype=torch.int32),
            torch.empty(4, device="cuda", dtype=torch.int32))


class FakeImplementationTest(unittest.TestCase):
    def test_padded_shapes(self):
        q = torch.empty(2, 16, 128, device="meta", dtype=torch.bfloat16)
        mask = torch.empty(2, 16, device="meta", dtype=torch.bool)
        out, lse = torch.ops.dflash.attention_padded(q, q, q, None, None, None, -1, mask, 2, 0.1,
                                                     True)
        self.assertEqual((out.shape, out.dtype), (q.shape, torch.bfloat16))
        self.assertEqual((lse.shape, lse.dtype), ((2, 2, 16), torch.float32))
        _, lse = torch.ops.dflash.attention_padded(q, q, q, None, None, None, -1, mask, 2, 0.1,
                                                   False)
        self.assertEqual(lse.numel(), 0)

    def test_packed_shapes_on_fake_cuda(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q, pos, table, cu = fake_packed_inputs()
            out, lse = torch.ops.dflash.attention_packed(q, q, q, pos, pos, table, 0, cu, 20, 12,
                                                         0.07, True)
            self.assertEqual((out.shape, out.dtype, out.device.type),
                             ((40, 768), torch.float16, "cuda"))
            self.assertEqual(lse.shape, (12, 40))


class EagerEntryOffCudaTest(unittest.TestCase):
    """run_padded / run_packed call the implementation directly only for plain CUDA tensors."""

    def test_fake_cuda_tensors_take_the_op(self):
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q, pos, table, cu = fake_packed_inputs()
            mask = torch.empty(2, 20, device="cuda", dtype=torch.bool)
            out, lse = ops.run_packed(q, q, q, pos, pos, table, 0, cu, 20, 12, 0.07, True)
            self.assertEqual((out.shape, lse.shape), ((40, 768), (12, 40)))
            padded = q.view(2, 20, 768)
            out, lse = ops.run_padded(padded, padded, padded, pos, pos, table, 0, mask, 12, 0.07,
                                      False)
            self.assertEqual((out.shape, lse.numel()), ((2, 20, 768), 0))

    def test_cpu_tensors_take_the_op(self):
        torch.manual_seed(0)
        q = torch.randn(2, 6, 128, dtype=torch.float64)
        mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=torch.bool)
        with KernelOnCpu():
            out, lse = ops.run_padded(q, q, q, None, None, None, -1, mask, 2, 0.1, True)
        expected, expected_lse = reference.attention_padded_reference(q, q, q, None, None, None,
                                                                      -1, mask, 2, 0.1, True)
        self.assertTrue(torch.equal(out, expected))
        self.assertTrue(torch.equal(lse, expected_lse))


class OpLastLaunchOnCpuTest(unittest.TestCase):
    """The op's reuse of the thread's last launch (ops._forward), its implementation run on CPU
    tensors against a fake native library that records what each launch receives."""

    class FakeLibrary:
        cuda_version = 13000

        def __init__(self):
            self.launched = []

        def workspace_bytes(self, args):
            return 512

        def register_positions(self, table, band, span):
            return 0

        def forward(self, args, workspace, size, stream):
            self.launched.append({"q": args.q, "mask": args.key_padding_mask,
                                  "cu_seqlens": args.cu_seqlens, "slots": args.slot_table,
                                  "tf32": args.allow_tf32})

    def setUp(self):
        self.library = self.FakeLibrary()
        table = build_slot_table(PositionSettings(span=16, position_buckets=16,
                                                  max_relative_positions=64))
        self.positions_id = ops.register_slot_table(table)
        self.slots = torch.tensor(table.table, dtype=torch.int32)
        patches = [mock.patch.object(_native, "require", lambda: self.library),
                   mock.patch.object(ops, "_current_stream", lambda device: 0),
                   mock.patch.object(ops, "_on_device", lambda device: contextlib.nullcontext()),
                   mock.patch.object(ops.tuning, "config", lambda *args: None),
                   mock.patch.object(torch.cuda, "current_device", lambda: 0),
                   mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: False)]
        for patch in patches:
            patch.start()
            self.addCleanup(patch.stop)
        ops._last_launch.launch = None
        self.addCleanup(setattr, ops._last_launch, "launch", None)

    def padded(self, q, mask, slots=None):
        pos = torch.zeros(32, q.size(-1), dtype=q.dtype)
        ops._padded(q, q, q, pos, pos, self.slots if slots is None else slots,
                    self.positions_id, mask, 2, 0.1, False)
        return ops._last_launch.launch

    def test_other_tensors_of_one_layout_reuse_and_are_pointed_at(self):
        q = torch.zeros(2, 8, 128, dtype=torch.float16)
        first = self.padded(q, torch.ones(2, 8, dtype=torch.bool))
        mask, q2 = torch.ones(2, 8, dtype=torch.bool), torch.zeros_like(q)
        slots = self.slots.clone()
        self.assertIs(self.padded(q2, mask, slots), first)
        self.assertEqual((self.library.launched[-1]["q"], self.library.launched[-1]["mask"],
                          self.library.launched[-1]["slots"]),
                         (q2.data_ptr(), mask.data_ptr(), slots.data_ptr()))
        # The kept launch holds none of the tensors it was built from.
        self.assertEqual([t for t in first.same_tensors if isinstance(t, torch.Tensor)], [])
        self.assertIsNone(first.key_mask)

    def test_what_refuses_reuse(self):
        q = torch.zeros(2, 8, 128, dtype=torch.float16)
        mask = torch.ones(2, 8, dtype=torch.bool)
        launch = self.padded(q, mask)
        self.assertIsNot(self.padded(q, torch.ones(2, 8, dtype=torch.uint8)), launch)  # dtype
        self.assertIsNone(self.padded(q, mask.long()))  # converted: not kept
        launch = self.padded(q, mask)
        narrower = torch.zeros(2, 4, 128, dtype=torch.float16)
        self.assertIsNot(self.padded(narrower, torch.ones(2, 4, dtype=torch.bool)), launch)
        with mock.patch.object(torch.cuda, "is_current_stream_capturing", lambda: True):
            launch = ops._last_launch.launch
            self.assertIsNot(self.padded(narrower, torch.ones(2, 4, dtype=torch.bool)), launch)
        single = torch.zeros(2, 8, 128)
        tf32 = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = False
            launch = self.padded(single, mask)
            self.assertIs(self.padded(single, mask), launch)
            torch.backends.cuda.matmul.allow_tf32 = True
            self.assertIsNot(self.padded(single, mask), launch)
            self.assertEqual(self.library.launched[-1]["tf32"], 1)
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32

    def test_packed_layout_points_at_each_calls_cu_seqlens(self):
        q = torch.zeros(12, 128, dtype=torch.bfloat16)
        pos = torch.zeros(32, 128, dtype=torch.bfloat16)
        for lengths in ([5, 7], [9, 3]):
            cu = torch.tensor([0, lengths[0], 12], dtype=torch.int32)
            ops._packed(q, q, q, pos, pos, self.slots, self.positions_id, cu, 9, 2, 0.1, False)
            self.assertEqual(self.library.launched[-1]["cu_seqlens"], cu.data_ptr())
        self.assertEqual(len(self.library.launched), 2)


@unittest.skipUnless(dflash_torch.kernel_available(), "libdflash_attention not built")
class NativeLibraryTest(unittest.TestCase):
    """The C interface's argument checks, which answer before any CUDA call (no GPU needed)."""

    def setUp(self):
        from dflash_torch import _native
        self.native = _native
        self.library = _native.require()

    def args(self, **fields):
        import ctypes
        args = self.native.Args()
        args.struct_size = ctypes.sizeof(self.native.Args)
        values = dict(dtype=self.native.FLOAT16, num_heads=12, head_dim=64, num_sequences=1,
                      max_seqlen=8, total_tokens=8, cu_seqlens=16, q=16, k=16, v=16, out=16,
                      scale=0.1)
        values.update(fields)
        for name, value in values.items():
            setattr(args, name, value)
        return args

    def expect(self, status, pattern, args):
        with self.assertRaises(self.native.KernelError) as caught:
            self.library.workspace_bytes(args)
        self.assertEqual(caught.exception.status, status)
        self.assertRegex(str(caught.exception), pattern)

    def test_versions(self):
        self.assertGreaterEqual(self.library.cuda_version, 12000)

    def test_short_struct(self):
        self.expect(self.native.INVALID_ARGUMENT, "struct_size", self.args(struct_size=8))

    def test_bad_dtype_and_head_dim(self):
        self.expect(self.native.INVALID_ARGUMENT, "unknown dtype 7", self.args(dtype=7))
        self.expect(self.native.UNSUPPORTED, "head_dim 48", self.args(head_dim=48))

    def test_packed_layout_needs_cu_seqlens(self):
        self.expect(self.native.INVALID_ARGUMENT, "cu_seqlens", self.args(cu_seqlens=None))

    def test_unknown_positions_id(self):
        self.expect(self.native.INVALID_ARGUMENT, "unknown positions_id 9999",
                    self.args(pos_key=16, positions_id=9999, slot_table=16))

    def test_bad_config_enum(self):
        import ctypes
        config = self.native.make_config(windows=5, mma=0, min_blocks_per_sm=2)
        self.expect(self.native.INVALID_ARGUMENT, "config.windows",
                    self.args(config=ctypes.pointer(config)))

    @unittest.skipIf(torch.cuda.is_available(), "a GPU is here: the device can be made current")
    def test_a_device_that_cannot_be_made_current(self):
        # Valid arguments pass every check above and reach cudaSetDevice, which fails here.
        self.expect(self.native.CUDA_ERROR, ": cudaSetDevice: ", self.args())
        self.expect(self.native.CUDA_ERROR, ": cudaSetDevice: ", self.args(device=3))

    def test_slot_tables_are_checked_and_shared(self):
        table = build_slot_table(PositionSettings(span=256, position_buckets=256,
                                                  max_relative_positions=512))
        first = self.library.register_positions(table.table, table.band, table.span)
        self.assertEqual(self.library.register_positions(table.table, table.band, table.span),
                         first)
        with self.assertRaisesRegex(self.native.KernelError, "outside"):
            self.library.register_positions(table.table, table.band, 100)


class ProfilesTest(unittest.TestCase):
    def test_family_keys(self):
        self.assertEqual(profiles.family_key("bf16", 64, False, True, True, 700),
                         "bf16/d64/packed/c2p+p2c/L1024")
        self.assertEqual(profiles.family_key("fp16", 32, True, False, True, 3), "fp16/d32/padded/p2c/L64")
        self.assertEqual(profiles.family_key("fp32", 128, True, False, False, 64),
                         "fp32/d128/padded/none/L64")

    def test_repository_profile_parses_and_matches(self):
        found = profiles.load_profiles(REPOSITORY / "config" / "profiles")
        self.assertTrue(found)
        h200 = profiles.match_profile(found, "NVIDIA H200", (9, 0), (13, 0))
        self.assertIsNotNone(h200)
        entry = h200.entries["bf16/d64/packed/c2p+p2c/L512"]
        self.assertEqual((entry.windows, entry.mma, entry.min_blocks_per_sm), (1, 1, 4))
        # Same CUDA major, a newer minor: the profile still applies; another GPU: none.
        self.assertIs(profiles.match_profile(found, "NVIDIA H200", (9, 0), (13, 2)), h200)
        self.assertIsNone(profiles.match_profile(found, "NVIDIA H100 80GB HBM3", (9, 0), (13, 0)))
        self.assertIsNone(profiles.match_profile(found, "NVIDIA H200", (9, 0), (12, 8)))

    def test_minor_version_rule(self):
        def made(cuda):
            return profiles.Profile("p", "G", (9, 0), cuda, f"{cuda}")
        candidates = [made((13, 0)), made((13, 4)), made((13, 6))]
        self.assertEqual(profiles.match_profile(candidates, "G", (9, 0), (13, 5)).cuda, (13, 4))
        self.assertEqual(profiles.match_profile(candidates[1:], "G", (9, 0), (13, 1)).cuda,
                         (13, 4))

    def test_unknown_config_key_is_an_error(self):
        text = ('format: 1\nname: x\ngpu: G\nsm: "9.0"\ncuda: "13.0"\nentries:\n'
                '  - family: bf16/d64/packed/c2p+p2c/L64\n'
                '    config: {windows: computed, min_blocks_per_sm: 4, colour: red}\n')
        with self.assertRaisesRegex(ValueError, "colour"):
            profiles.parse_profile(text, "x.yaml")


class OptimizeDebertaTest(unittest.TestCase):
    def setUp(self):
        deberta.reset_fallback_warnings()

    def test_parameters_and_state_dict_are_unchanged(self):
        model = make_model()
        before_keys = list(model.state_dict().keys())
        before = dict(model.named_parameters())
        buffers = {n for n, _ in model.named_buffers()}
        dflash_torch.optimize_deberta(model)
        self.assertEqual(list(model.state_dict().keys()), before_keys)
        after = dict(model.named_parameters())
        self.assertEqual(list(after), list(before))
        for name, parameter in after.items():
            self.assertIs(parameter, before[name], name)
        self.assertEqual({n for n, _ in model.named_buffers()} - buffers,
                         {"deberta.encoder.dflash_slot_table"})
        self.assertIsInstance(model.deberta.encoder, deberta.DflashDebertaV2Encoder)
        dflash_torch.restore_deberta(model)
        self.assertIs(type(model.deberta.encoder), modeling_deberta_v2.DebertaV2Encoder)
        self.assertIs(type(model.deberta.encoder.layer[0].attention.self),
                      modeling_deberta_v2.DisentangledSelfAttention)
        self.assertEqual({n for n, _ in model.named_buffers()}, buffers)

    def test_rejects_models_without_deberta_v2(self):
        with self.assertRaises(TypeError):
            dflash_torch.optimize_deberta(torch.nn.Linear(2, 2))
        with self.assertRaises(ValueError):
            dflash_torch.optimize_deberta(make_model(), layout="ragged")

    def test_cpu_falls_back_with_one_warning(self):
        model = make_model()
        stock = copy.deepcopy(model)
        dflash_torch.optimize_deberta(model, layout="packed")
        ids, mask = batch([7, 3], 9)
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            first = model(input_ids=ids, attention_mask=mask).logits
            second = model(input_ids=ids, attention_mask=mask).logits
        messages = [str(w.message) for w in caught if "dflash_torch" in str(w.message)]
        self.assertEqual(len(messages), 1, messages)
        self.assertIn("tensors on cpu", messages[0])
        with torch.no_grad():
            expected = stock(input_ids=ids, attention_mask=mask).logits
        self.assertTrue(torch.equal(first, expected))
        self.assertTrue(torch.equal(second, expected))

    def test_fallback_error_mode_names_the_reason(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        ids, mask = batch([4], 4)
        with torch.no_grad(), self.assertRaisesRegex(dflash_torch.FallbackError, "tensors on cpu"):
            model(input_ids=ids, attention_mask=mask)

    def check_reason(self, model, pattern, grad=False, **kwargs):
        ids, mask = batch([5, 2], 6)
        with torch.set_grad_enabled(grad), KernelOnCpu():
            with self.assertRaisesRegex(dflash_torch.FallbackError, pattern):
                model(input_ids=ids, attention_mask=mask, **kwargs)

    def test_unsupported_head_dim(self):
        model = make_model(hidden_size=96, num_attention_heads=2)  # d = 48
        dflash_torch.optimize_deberta(model, fallback="error")
        self.check_reason(model, "head dim 48")

    def test_gradients_required(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        self.check_reason(model, "gradients are required", grad=True)

    def test_output_attentions(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        self.check_reason(model, "output_attentions", output_attentions=True)

    def test_training_mode_dropout(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error").train()
        self.check_reason(model, "attention dropout")

    def test_unsupported_dtype(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error").to(torch.float64)
        self.check_reason(model, "dtype torch.float64")

    def test_fallbacks_warn_and_match_stock(self):
        """Every fallback in "warn" mode runs transformers' own forward: the same outputs."""
        cases = [(dict(hidden_size=96, num_attention_heads=2), {}, False, "head dim"),
                 ({}, {}, True, "gradients"),
                 ({}, dict(output_attentions=True), False, "output_attentions")]
        ids, mask = batch([5, 2], 6)
        for overrides, kwargs, grad, reason in cases:
            model = make_model(**overrides)
            stock = copy.deepcopy(model)
            dflash_torch.optimize_deberta(model)
            with torch.set_grad_enabled(grad), KernelOnCpu(), \
                    warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = model(input_ids=ids, attention_mask=mask, **kwargs).logits
                expected = stock(input_ids=ids, attention_mask=mask, **kwargs).logits
            self.assertTrue(torch.equal(got, expected), reason)
            self.assertTrue(any(reason in str(w.message) for w in caught), reason)


class IntegrationOnCpuTest(unittest.TestCase):
    """optimize_deberta's kernel path with the reference kernels, against stock transformers."""

    def setUp(self):
        deberta.reset_fallback_warnings()

    def compare(self, cls=DebertaV2ForSequenceClassification, lengths=(9, 4, 13), length=13,
                left=False, **overrides):
        model = make_model(cls, **overrides)
        ids, mask = batch(list(lengths), length, left=left)
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        for layout in ("padded", "packed"):
            dflash_torch.optimize_deberta(model, layout=layout, fallback="error")
            with torch.no_grad(), KernelOnCpu():
                got = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
            dflash_torch.restore_deberta(model)
            keep = mask.bool()
            # Real positions match; padding positions differ by design (deberta.py docstring).
            for ours, stock in zip(got.hidden_states, expected.hidden_states):
                error = relative_l2(ours[keep], stock[keep])
                self.assertLess(error, 1e-5, f"{layout} {overrides}")
            if cls is DebertaV2ForTokenClassification:
                error = relative_l2(got.logits[keep], expected.logits[keep])
            elif not left:
                # With left padding the pooler reads position 0, a padding position.
                error = relative_l2(got.logits, expected.logits)
            self.assertLess(error, 1e-5, f"{layout} {overrides}")
            self.assertEqual(len(got.hidden_states), model.config.num_hidden_layers + 1)

    def test_v3_like_sequence_classification(self):
        self.compare()

    def test_left_padding(self):
        self.compare(left=True)

    def test_token_classification(self):
        self.compare(DebertaV2ForTokenClassification)

    def test_v2_like_with_conv_and_separate_position_projections(self):
        self.compare(share_att_key=False, conv_kernel_size=3, conv_act="gelu",
                     norm_rel_ebd="none", position_buckets=-1, max_relative_positions=24)

    def test_c2p_only(self):
        self.compare(pos_att_type=["c2p"])

    def test_p2c_only(self):
        self.compare(pos_att_type=["p2c"], share_att_key=False)

    def test_no_position_terms(self):
        self.compare(relative_attention=False)

    def test_head_dim_64_and_long_sequences(self):
        # Beyond the band of 16 buckets: saturated deltas.
        self.compare(hidden_size=128, num_attention_heads=2, lengths=(60, 33), length=60)

    def test_base_model(self):
        model = make_model(DebertaV2Model)
        ids, mask = batch([6, 3], 6)
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask).last_hidden_state
        dflash_torch.optimize_deberta(model, layout="packed", fallback="error")
        with torch.no_grad(), KernelOnCpu():
            got = model(input_ids=ids, attention_mask=mask).last_hidden_state
        keep = mask.bool()
        self.assertLess(relative_l2(got[keep], expected[keep]), 1e-5)
        self.assertTrue(torch.equal(got[~keep], torch.zeros_like(got[~keep])))

    def test_lse_of_reference(self):
        q = torch.randn(5, 64, dtype=torch.float64)
        cu = torch.tensor([0, 2, 5], dtype=torch.int32)
        _, lse = reference.attention_packed_reference(q, q, q, None, None, None, -1, cu, 3, 2,
                                                      0.125, True)
        scores = (q[2:5, :32] @ q[2:5, :32].t()) * 0.125
        self.assertTrue(torch.allclose(lse[0, 2:5].double(), torch.logsumexp(scores, -1)))


def kernel_logits(model, ids, mask, **kwargs):
    with torch.no_grad(), KernelOnCpu():
        return model(input_ids=ids, attention_mask=mask, **kwargs).logits


def stock_logits(model, ids, mask):
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits


class ProjectionsTest(unittest.TestCase):
    """projections.py: the fused Q/K/V GEMM and the position-table cache."""

    def setUp(self):
        deberta.reset_fallback_warnings()

    def test_fused_qkv_equals_three_projections(self):
        attention = make_model().deberta.encoder.layer[0].attention.self
        for shape in ((3, 7, 64), (11, 64)):  # padded [B, L, H] and packed [T, H]
            hidden = torch.randn(*shape)
            with torch.no_grad():
                got = projections.query_key_value(attention, hidden)
                expected = (attention.query_proj(hidden), attention.key_proj(hidden),
                            attention.value_proj(hidden))
            for ours, stock in zip(got, expected):
                self.assertEqual(ours.shape, stock.shape)
                self.assertTrue(torch.allclose(ours, stock, atol=1e-6))
            # One GEMM: three column views of one [..., 3 H*d] result, no copies.
            self.assertEqual(len({t.untyped_storage().data_ptr() for t in got}), 1)
            self.assertEqual(got[1].stride(-2), 3 * 64)
            self.assertIn("_dflash_qkv_cache", attention.__dict__)

    def test_both_layouts_run_the_fused_projections_and_cached_positions(self):
        for layout in ("padded", "packed"):
            model = make_model()
            ids, mask = batch([7, 3], 9)
            expected = stock_logits(model, ids, mask)
            dflash_torch.optimize_deberta(model, layout=layout, fallback="error")
            got = kernel_logits(model, ids, mask)
            self.assertLess(relative_l2(got, expected), 1e-5, layout)
            for layer in model.deberta.encoder.layer:
                stacked = layer.attention.self.__dict__["_dflash_qkv_cache"][2]
                self.assertEqual(stacked[0].shape, (3 * 64, 64))  # one GEMM for Q, K, V
                self.assertIn("_dflash_positions_cache", layer.attention.self.__dict__)
            # A second forward reuses the position tables: the relative embeddings are not
            # computed again.
            calls = []
            encoder = model.deberta.encoder
            stock_rel_embedding = encoder.get_rel_embedding
            encoder.get_rel_embedding = lambda: calls.append(1) or stock_rel_embedding()
            projections.clear_caches(model)
            kernel_logits(model, ids, mask)
            kernel_logits(model, ids, mask)
            self.assertEqual(len(calls), 1, layout)

    def test_in_place_updates_invalidate_the_caches(self):
        model = make_model(share_att_key=False, pos_att_type=["c2p", "p2c"])
        stock = copy.deepcopy(model)
        dflash_torch.optimize_deberta(model, fallback="error")
        ids, mask = batch([8, 5], 8)
        kernel_logits(model, ids, mask)  # fills the caches
        encoder, stock_encoder = model.deberta.encoder, stock.deberta.encoder
        edits = [lambda e: e.layer[0].attention.self.query_proj.weight,
                 lambda e: e.layer[1].attention.self.key_proj.bias,
                 lambda e: e.layer[0].attention.self.value_proj.weight,
                 lambda e: e.layer[1].attention.self.pos_key_proj.weight,
                 lambda e: e.layer[0].attention.self.pos_query_proj.bias,
                 lambda e: e.rel_embeddings.weight,
                 lambda e: e.LayerNorm.weight]
        for index, edit in enumerate(edits):
            with torch.no_grad():
                edit(encoder).add_(0.5)
                edit(stock_encoder).add_(0.5)
            got = kernel_logits(model, ids, mask)
            self.assertLess(relative_l2(got, stock_logits(stock, ids, mask)), 1e-5, index)

    def test_load_state_dict_and_replaced_data_invalidate_the_caches(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        other = make_model(seed=5)
        ids, mask = batch([6, 4], 6)
        kernel_logits(model, ids, mask)
        model.load_state_dict(other.state_dict())
        got = kernel_logits(model, ids, mask)
        self.assertLess(relative_l2(got, stock_logits(other, ids, mask)), 1e-5)
        # .data replaced (as .to() does): new storage, new data pointer.
        third = make_model(seed=9)
        for ours, theirs in zip(model.parameters(), third.parameters()):
            ours.data = theirs.detach().clone()
        got = kernel_logits(model, ids, mask)
        self.assertLess(relative_l2(got, stock_logits(third, ids, mask)), 1e-5)

    def test_inference_tensor_parameters_are_not_cached(self):
        stock = make_model()
        with torch.inference_mode():  # parameters copied here are inference tensors
            model = dflash_torch.optimize_deberta(copy.deepcopy(stock), fallback="error")
        self.assertTrue(model.deberta.encoder.layer[0].attention.self.query_proj.weight
                        .is_inference())
        ids, mask = batch([6, 4], 6)
        with torch.inference_mode(), KernelOnCpu():
            got = model(input_ids=ids, attention_mask=mask).logits
            # An in-place update inside inference_mode bumps no version counter: nothing cached.
            for module in (model, stock):
                module.deberta.encoder.layer[0].attention.self.key_proj.weight.mul_(1.5)
            updated = model(input_ids=ids, attention_mask=mask).logits
        self.assertLess(relative_l2(got, stock_logits(make_model(), ids, mask)), 1e-5)
        self.assertLess(relative_l2(updated, stock_logits(stock, ids, mask)), 1e-5)
        for name in projections.CACHE_ATTRIBUTES:
            self.assertNotIn(name, model.deberta.encoder.layer[0].attention.self.__dict__)

    def test_no_cache_when_autograd_needs_the_projections(self):
        model = make_model()
        encoder = model.deberta.encoder
        attention = encoder.layer[0].attention.self
        stock = copy.deepcopy(attention)
        stock_encoder = copy.deepcopy(encoder)
        hidden = torch.randn(2, 5, 64)
        weights = torch.randn(3, 2, 5, 64)
        q, k, v = projections.query_key_value(attention, hidden)
        (sum((w * t).sum() for w, t in zip(weights, (q, k, v)))).backward()
        expected = (stock.query_proj(hidden), stock.key_proj(hidden), stock.value_proj(hidden))
        (sum((w * t).sum() for w, t in zip(weights, expected))).backward()
        self.assertNotIn("_dflash_qkv_cache", attention.__dict__)
        for name in ("query_proj", "key_proj", "value_proj"):
            for part in ("weight", "bias"):
                ours = getattr(getattr(attention, name), part).grad
                theirs = getattr(getattr(stock, name), part).grad
                self.assertIsNotNone(ours, f"{name}.{part}")
                self.assertTrue(torch.allclose(ours, theirs, atol=1e-6), f"{name}.{part}")
        pos_key, pos_query = projections.position_tables(encoder, attention,
                                                         encoder.get_rel_embedding)
        (pos_key.sum() + pos_query.square().sum()).backward()
        self.assertNotIn("_dflash_positions_cache", attention.__dict__)
        relative = stock_encoder.get_rel_embedding()[:2 * stock.pos_ebd_size]
        (stock.key_proj(relative).sum() + stock.query_proj(relative).square().sum()).backward()
        self.assertTrue(torch.allclose(encoder.rel_embeddings.weight.grad,
                                       stock_encoder.rel_embeddings.weight.grad, atol=1e-6))
        self.assertTrue(torch.allclose(encoder.LayerNorm.weight.grad,
                                       stock_encoder.LayerNorm.weight.grad, atol=1e-6))

    def test_gradients_of_the_patched_model_match_stock(self):
        model = make_model()
        stock = copy.deepcopy(model)
        dflash_torch.optimize_deberta(model)
        ids, mask = batch([6, 4], 6)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model(input_ids=ids, attention_mask=mask).logits.square().sum().backward()
        stock(input_ids=ids, attention_mask=mask).logits.square().sum().backward()
        for (name, ours), theirs in zip(model.named_parameters(), stock.parameters()):
            if theirs.grad is not None:
                self.assertTrue(torch.allclose(ours.grad, theirs.grad, atol=1e-6), name)

    def test_hooked_projections_are_called(self):
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        stock = copy.deepcopy(model)
        dflash_torch.restore_deberta(stock)
        calls = []
        for layer in model.deberta.encoder.layer:
            layer.attention.self.key_proj.register_forward_hook(lambda *a: calls.append(1))
        ids, mask = batch([5, 5], 5)
        got = kernel_logits(model, ids, mask)
        # Per layer: the tokens and the position table (share_att_key), every forward.
        self.assertEqual(len(calls), 2 * model.config.num_hidden_layers)
        kernel_logits(model, ids, mask)
        self.assertEqual(len(calls), 4 * model.config.num_hidden_layers)
        self.assertLess(relative_l2(got, stock_logits(stock, ids, mask)), 1e-5)

    def test_state_dict_and_save_pretrained_round_trip(self):
        import tempfile
        model = make_model()
        keys = list(model.state_dict())
        dflash_torch.optimize_deberta(model, fallback="error")
        ids, mask = batch([7, 2], 7)
        expected = kernel_logits(model, ids, mask)  # caches filled
        self.assertEqual(list(model.state_dict()), keys)
        with tempfile.TemporaryDirectory() as directory:
            model.save_pretrained(directory)  # safetensors: refuses shared storage
            self.assertTrue(any(name.endswith(".safetensors") for name in os.listdir(directory)))
            loaded = DebertaV2ForSequenceClassification.from_pretrained(directory).eval()
        self.assertLess(relative_l2(stock_logits(loaded, ids, mask), expected), 1e-5)
        dflash_torch.optimize_deberta(loaded, fallback="error")
        self.assertLess(relative_l2(kernel_logits(loaded, ids, mask), expected), 1e-5)
        restored = dflash_torch.restore_deberta(model)
        for module in restored.modules():
            self.assertFalse(set(projections.CACHE_ATTRIBUTES) & set(module.__dict__))

    def test_compiled_model_sees_weight_updates(self):
        torch._dynamo.reset()
        model = dflash_torch.optimize_deberta(make_model(), fallback="error")
        stock = copy.deepcopy(model)
        dflash_torch.restore_deberta(stock)
        ids, mask = batch([8, 5], 8)
        kernel_logits(model, ids, mask)  # eager caches filled before compiling
        with torch.no_grad(), KernelOnCpu():
            compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
            first = compiled(input_ids=ids, attention_mask=mask).logits
            self.assertLess(relative_l2(first, stock_logits(stock, ids, mask)), 1e-5)
            for target in (model, stock):
                target.deberta.encoder.layer[0].attention.self.query_proj.weight.add_(0.5)
                target.deberta.encoder.rel_embeddings.weight.add_(0.5)
            second = compiled(input_ids=ids, attention_mask=mask).logits
        self.assertLess(relative_l2(second, stock_logits(stock, ids, mask)), 1e-5)


class LayerTailTest(unittest.TestCase):
    """layer_tail.py: SelfOutput, Intermediate and Output by their ops, bitwise the modules'."""

    def modules_result(self, layer, context, hidden):
        attention_output = layer.attention.output(context, hidden)
        return layer.output(layer.intermediate(attention_output), attention_output)

    def direct(self, layer):
        return layer_tail._direct_ops(layer.attention.output, layer.intermediate, layer.output)

    def check(self, layer, expect_direct, seed=5):
        for shape in ((3, 7, 64), (11, 64)):  # padded [B, L, H] and packed [T, H]
            context, hidden = torch.randn(*shape), torch.randn(*shape)
            with torch.no_grad():
                torch.manual_seed(seed)
                got = layer_tail.layer_tail(layer, context, hidden)
                torch.manual_seed(seed)
                expected = self.modules_result(layer, context, hidden)
            self.assertTrue(torch.equal(got, expected))
        self.assertEqual(self.direct(layer) is not None, expect_direct)

    def test_plain_modules_run_as_their_ops(self):
        for act in ("gelu", "relu"):
            self.check(make_model(hidden_act=act).deberta.encoder.layer[0], True)
        layer = make_model().deberta.encoder.layer[0]
        del layer.intermediate.intermediate_act_fn  # a plain function instead of a module
        layer.intermediate.intermediate_act_fn = torch.tanh
        self.check(layer, True)

    def test_modules_run_where_they_must(self):
        calls = []
        count = lambda *args: calls.append(1)

        def hooked_dense(layer):
            layer.intermediate.dense.register_forward_hook(count)

        def replaced_forward(layer):  # as accelerate's hooks do
            norm = layer.output.LayerNorm
            original = norm.forward
            norm.forward = lambda x: count() or original(x)

        def subclass(layer):
            layer.attention.output.__class__ = type(
                "CountingSelfOutput", (modeling_deberta_v2.DebertaV2SelfOutput,),
                {"forward": lambda self, h, i: count() or
                 modeling_deberta_v2.DebertaV2SelfOutput.forward(self, h, i)})

        def hooked_activation(layer):
            layer.intermediate.intermediate_act_fn.register_forward_pre_hook(count)

        for change in (hooked_dense, replaced_forward, subclass, hooked_activation):
            layer = make_model().deberta.encoder.layer[0]
            change(layer)
            calls.clear()
            self.check(layer, expect_direct=False)
            self.assertEqual(len(calls), 4, change.__name__)  # 2 shapes x (ours + stock)

    def test_global_hooks_and_training_dropout_run_the_modules(self):
        layer = make_model().deberta.encoder.layer[0]
        seen = []
        handle = torch.nn.modules.module.register_module_forward_hook(
            lambda module, *args: seen.append(type(module).__name__))
        try:
            self.check(layer, expect_direct=False)
        finally:
            handle.remove()
        self.assertIn("DebertaV2Intermediate", seen)
        layer.train()  # hidden dropout 0.1 is active: the same draws as the modules'
        self.check(layer, expect_direct=False)
        layer.output.dropout.p = 0.0
        layer.attention.output.dropout.p = 0.0
        self.check(layer, expect_direct=True)


class HostPackedLayoutTest(unittest.TestCase):
    """use_packed_layout: the packed encoder takes a layout built from the host mask."""

    def setUp(self):
        deberta.reset_fallback_warnings()

    def test_given_layout_replaces_the_device_read(self):
        model = make_model()
        ids, mask = batch([9, 4, 13], 13)
        expected = stock_logits(model, ids, mask)
        dflash_torch.optimize_deberta(model, layout="packed", fallback="error")
        layout = dflash_torch.packed_layout(mask)
        original = deberta.packed_layout

        def refuse(_):
            raise AssertionError("the encoder read the mask")

        deberta.packed_layout = refuse
        try:
            with dflash_torch.use_packed_layout(layout):
                got = kernel_logits(model, ids, mask)
            with self.assertRaisesRegex(AssertionError, "read the mask"):
                kernel_logits(model, ids, mask)  # outside the block: the encoder builds it
        finally:
            deberta.packed_layout = original
        self.assertLess(relative_l2(got, expected), 1e-5)

    def test_shape_mismatch_is_refused(self):
        model = dflash_torch.optimize_deberta(make_model(), layout="packed", fallback="error")
        ids, mask = batch([4, 2], 6)
        with dflash_torch.use_packed_layout(dflash_torch.packed_layout(mask[:, :5])):
            with self.assertRaisesRegex(ValueError, "use_packed_layout"):
                kernel_logits(model, ids, mask)

    def test_layout_to_same_device_is_itself(self):
        layout = dflash_torch.packed_layout(torch.tensor([[1, 1, 0]]))
        self.assertIs(layout.to("cpu"), layout)
        moved = layout.to("meta")
        self.assertEqual((moved.index.device.type, moved.cu_seqlens.device.type), ("meta", "meta"))
        self.assertEqual((moved.max_seqlen, moved.total_tokens), (2, 2))


class CudaGraphsOptionTest(unittest.TestCase):
    """optimize_deberta(..., cuda_graphs=True) off the GPU: its options, the eager path where no
    graph can run, and the stamp that drops recorded graphs when the encoder changes (the
    recording and replay themselves are GPU tests)."""

    def test_options_are_checked(self):
        for layout in ("padded", "packed"):
            model = dflash_torch.optimize_deberta(make_model(), layout=layout, cuda_graphs=True)
            self.assertIsInstance(model.deberta.encoder._dflash_graphs,
                                  encoder_graphs.EncoderGraphs)
        with self.assertRaisesRegex(ValueError, "length_multiple"):
            dflash_torch.optimize_deberta(make_model(), cuda_graphs=True, graph_length_multiple=0)
        with self.assertRaisesRegex(ValueError, "max_graphs"):
            dflash_torch.optimize_deberta(make_model(), cuda_graphs=True, max_graphs=0)

    def test_cpu_tensors_run_eagerly_and_restore_drops_the_graphs(self):
        for layout in ("padded", "packed"):
            model = make_model()
            ids, mask = batch([9, 4], 9)
            with torch.no_grad():
                expected = model(input_ids=ids, attention_mask=mask).logits
            dflash_torch.optimize_deberta(model, layout=layout, fallback="error",
                                          cuda_graphs=True)
            graphs = model.deberta.encoder._dflash_graphs
            self.assertIsInstance(graphs, encoder_graphs.EncoderGraphs)
            with torch.no_grad(), KernelOnCpu():
                got = model(input_ids=ids, attention_mask=mask).logits
            self.assertLess(relative_l2(got, expected), 1e-5, layout)
            self.assertEqual((graphs.recorded, len(graphs)), (0, 0))
            self.assertEqual(dflash_torch.reset_graphs(model), 0)
            dflash_torch.restore_deberta(model)
            self.assertNotIn("_dflash_graphs", model.deberta.encoder.__dict__)

    def test_token_counts_round_up_by_at_most_an_eighth(self):
        graphs = encoder_graphs.EncoderGraphs(deberta.run_layers, length_multiple=16)
        keys = set()
        for tokens in range(1, 5000):
            key = graphs.tokens_key(tokens)
            self.assertGreaterEqual(key, tokens)
            self.assertLessEqual(key - tokens, max(16, tokens // 8), tokens)
            keys.add(key)
        self.assertLess(len(keys), 80)  # about eight per power of two
        for multiple in (1, 8, 16, 64):
            graphs = encoder_graphs.EncoderGraphs(deberta.run_layers, length_multiple=multiple)
            for tokens in range(1, 5000):
                key = graphs.tokens_key(tokens)
                for longest in (64, 128, 512):
                    extra = graphs.extra_sequences(key, longest)
                    self.assertLessEqual(key - tokens, extra * longest, (multiple, tokens))

    def test_the_packed_graphs_computation_equals_the_packed_forward(self):
        """What a packed graph records, run eagerly on the CPU: the layers on the layout that
        fixed_shape_layout computes from the static inputs (one padding position more per row,
        extra rows in extra sequences), against the packed forward's real tokens; v3 and v2
        (the ConvLayer unpacks and packs inside the graph), right and left padding."""
        v2 = dict(conv_kernel_size=3, position_buckets=-1, max_relative_positions=-1,
                  pos_att_type=["c2p", "p2c"], share_att_key=False)
        cases = (({}, [9, 4, 13], 13, False), ({}, [16, 15], 16, False),
                 ({}, [5, 11, 2], 11, True), (v2, [7, 12, 3], 12, False),
                 (v2, [7, 12, 3], 12, True))
        for overrides, lengths, length, left in cases:
            model = dflash_torch.optimize_deberta(make_model(**overrides), layout="packed",
                                                  fallback="error")
            encoder = model.deberta.encoder
            ids, mask = batch(lengths, length, left=left)
            graphs = encoder_graphs.EncoderGraphs(deberta.run_layers, length_multiple=4)
            with torch.no_grad(), KernelOnCpu():
                hidden = model.deberta.embeddings(input_ids=ids, mask=mask)
                exact = packing.packed_layout(mask)
                expected = deberta.run_layers(encoder, hidden, mask, True, exact)
                # As EncoderGraphs records it: width rounded to 64 plus one, the longest
                # sequence rounded to 64 (64 here), the token count by tokens_key.
                static_hidden = hidden.new_zeros(len(lengths), 65, hidden.shape[-1])
                static_hidden[:, :length] = hidden
                static_mask = mask.new_zeros(len(lengths), 65)
                static_mask[:, :length] = mask
                tokens = graphs.tokens_key(exact.total_tokens)
                self.assertGreater(tokens, exact.total_tokens)  # extra rows in every case
                layout = packing.fixed_shape_layout(static_mask, tokens, 64,
                                                    graphs.extra_sequences(tokens, 64))
                got = deberta.run_layers(encoder, static_hidden, static_mask, True, layout)
            self.assertEqual(len(got), len(expected))
            for ours, theirs in zip(got, expected):
                self.assertEqual(ours.shape[0], tokens)
                self.assertLess(relative_l2(ours[:exact.total_tokens], theirs), 1e-6,
                                f"{overrides} left={left}")

    def test_the_stamp_sees_every_change_a_graph_cannot(self):
        model = make_model()
        encoder = model.deberta.encoder
        graphs = encoder_graphs.EncoderGraphs(deberta.run_layers)

        def stamp():
            graphs._modules = list(encoder.modules())
            return graphs._current_stamp()

        first = stamp()
        self.assertIsNotNone(first)
        self.assertEqual(stamp(), first)
        dense = encoder.layer[1].intermediate.dense
        changes = {
            "in-place update": lambda: dense.weight.add_(1.0),
            "load_state_dict": lambda: model.load_state_dict(make_model(seed=1).state_dict()),
            "reassigned parameter": lambda: setattr(
                dense, "bias", torch.nn.Parameter(dense.bias.detach().clone())),
            "replaced module": lambda: setattr(encoder.layer[0].output, "dense",
                                               torch.nn.Linear(96, 64).eval()),
            "moved": lambda: model.to(torch.float64),
        }
        for name, change in changes.items():
            before = stamp()
            with torch.no_grad():
                change()
            self.assertNotEqual(stamp(), before, name)
        handle = encoder.layer[0].attention.output.register_forward_hook(lambda *args: None)
        self.assertIsNone(stamp(), "a hook must fire: no graph")
        handle.remove()
        self.assertIsNotNone(stamp())
        encoder.layer[1].output.dropout.train()
        self.assertIsNone(stamp(), "a module in training mode: no graph")

    def test_inference_tensors_and_copies(self):
        model = make_model()
        with torch.inference_mode():
            dflash_torch.optimize_deberta(model, cuda_graphs=True, graph_length_multiple=8)
            model.deberta.encoder.register_buffer("extra", torch.zeros(2), persistent=False)
        encoder = model.deberta.encoder
        self.assertTrue(encoder.extra.is_inference())
        self.assertFalse(encoder.dflash_slot_table.is_inference())
        graphs = encoder._dflash_graphs
        graphs._modules = list(encoder.modules())
        self.assertIsNotNone(graphs._current_stamp())  # no version counter read from "extra"
        copied = copy.deepcopy(model).deberta.encoder._dflash_graphs
        self.assertIsNot(copied, graphs)
        self.assertEqual((copied.length_multiple, copied.max_graphs, len(copied)), (8, 64, 0))
        pickled = pickle.loads(pickle.dumps(graphs))
        self.assertEqual((pickled.length_multiple, pickled.recorded), (8, 0))
        old = encoder_graphs.EncoderGraphs.__new__(encoder_graphs.EncoderGraphs)
        old.__setstate__({"encode": deberta._encode, "length_multiple": 16, "max_graphs": 4})
        self.assertEqual((old.length_multiple, old.max_graphs), (16, 4))  # the first version's


class CompileTest(unittest.TestCase):
    """torch.compile(fullgraph=True) of a patched model: one graph holding the custom op."""

    def test_fullgraph_compile_runs_the_op(self):
        torch._dynamo.reset()
        model = make_model()
        ids, mask = batch([8, 5], 8)
        with torch.no_grad():
            expected = model(input_ids=ids, attention_mask=mask).logits
        dflash_torch.optimize_deberta(model, fallback="error")
        seen = []

        def backend(graph_module, example_inputs):
            seen.extend(str(node.target) for node in graph_module.graph.nodes)
            from torch._dynamo.backends.common import aot_autograd
            return aot_autograd(fw_compiler=lambda gm, _: gm)(graph_module, example_inputs)

        with torch.no_grad(), KernelOnCpu():
            compiled = torch.compile(model, fullgraph=True, backend=backend)
            got = compiled(input_ids=ids, attention_mask=mask).logits
        self.assertIn("dflash.attention_padded", " ".join(seen))
        self.assertLess(relative_l2(got, expected), 1e-5)

    def compiled_gemms(self, model, ids, mask):
        """The compiled graph's GEMM nodes by target, and the compiled model's logits."""
        seen = []

        def backend(graph_module, example_inputs):
            from torch._dynamo.backends.common import aot_autograd

            def forward_compiler(graph, _):
                seen.extend(str(node.target) for node in graph.graph.nodes)
                return graph
            return aot_autograd(fw_compiler=forward_compiler)(graph_module, example_inputs)

        torch._dynamo.reset()
        with torch.no_grad(), KernelOnCpu():
            logits = torch.compile(model, fullgraph=True, backend=backend)(
                input_ids=ids, attention_mask=mask).logits
        gemms = collections.Counter(t.split(".")[1] for t in seen
                                    if t in ("aten.addmm.default", "aten.baddbmm.default"))
        return dict(gemms), logits

    def test_compiled_projections_take_fewer_gemms(self):
        # Per layer: Q / K / V by one GEMM, SelfOutput, FFN in and out (4); the pooler and the
        # classifier (2); every layer's PosK and PosQ by one batched GEMM each.
        ids, mask = batch([8, 5], 8)
        for overrides in ({}, {"share_att_key": False, "num_hidden_layers": 3},
                          {"pos_att_type": ["c2p"]}):
            model = make_model(**overrides)
            expected = stock_logits(model, ids, mask)
            dflash_torch.optimize_deberta(model, fallback="error")
            gemms, logits = self.compiled_gemms(model, ids, mask)
            layers = model.config.num_hidden_layers
            self.assertEqual(gemms, {"addmm": 4 * layers + 2,
                                     "baddbmm": len(model.config.pos_att_type)}, overrides)
            self.assertLess(relative_l2(logits, expected), 1e-5, overrides)

    def test_compiled_hooked_projections_run_one_by_one(self):
        ids, mask = batch([8, 5], 8)
        model = make_model()
        expected = stock_logits(model, ids, mask)
        dflash_torch.optimize_deberta(model, fallback="error")
        calls = []
        attention = model.deberta.encoder.layer[1].attention.self
        attention.key_proj.register_forward_hook(lambda *_: calls.append("key"))
        gemms, logits = self.compiled_gemms(model, ids, mask)
        # Layer 1's Q / K / V by three GEMMs, and every layer's position tables by one each.
        self.assertEqual(gemms, {"addmm": 4 * 2 + 2 + 2 + 2 * 2}, gemms)
        self.assertLess(relative_l2(logits, expected), 1e-5)
        self.assertEqual(calls, ["key", "key"])  # its input rows and the relative embeddings

    def test_fullgraph_compile_on_meta(self):
        torch._dynamo.reset()
        model = dflash_torch.optimize_deberta(make_model(), fallback="error").to("meta")
        ids = torch.zeros(2, 8, dtype=torch.long, device="meta")
        mask = torch.ones(2, 8, dtype=torch.long, device="meta")
        with torch.no_grad():
            compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
            logits = compiled(input_ids=ids, attention_mask=mask).logits
        self.assertEqual((logits.shape, logits.device.type), ((2, 3), "meta"))


if __name__ == "__main__":
    unittest.main()
