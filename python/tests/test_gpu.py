"""GPU tests of dflash_torch: the ops against the float64 reference, padded against packed, the
log-sum-exp, no host synchronisation, the caller's stream, CUDA-graph capture, torch.compile, and
optimize_deberta against stock transformers. Skipped without a CUDA device or the library.

Run on the GPU host: python -m pytest python/tests (bench/torch/run_on_gpu.sh does).
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import os
import sys
import unittest
import warnings
from pathlib import Path
from unittest import mock

import torch

try:  # the installed package (the GPU run tests the wheel), else the source tree
    import dflash_torch  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import dflash_torch  # noqa: E402
from dflash_torch import deberta, ops, packing, reference  # noqa: E402
from dflash_torch.relative_positions import PositionSettings, build_slot_table  # noqa: E402

HAVE_GPU = torch.cuda.is_available() and dflash_torch.kernel_available()
V3 = PositionSettings(span=256, position_buckets=256, max_relative_positions=512)
# Relative L2 against float64 on the same rounded inputs (kernels/attention/DESIGN.md, accuracy).
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-5, "tf32": 5e-3}


def relative_l2(a, b) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


class Problem:
    """Random inputs of one attention call, v3 positions, packed and padded views of one batch."""

    def __init__(self, lengths, heads, head_dim, dtype, c2p=True, p2c=True, seed=0):
        generator = torch.Generator(device="cuda").manual_seed(seed)
        width = heads * head_dim
        total = sum(lengths)
        table = build_slot_table(V3)
        self.positions_id = ops.register_slot_table(table)
        self.slot_table = torch.tensor(table.table, dtype=torch.int32, device="cuda")
        qkv = torch.randn(total, 3 * width, device="cuda", generator=generator).to(dtype)
        self.q, self.k, self.v = qkv[:, :width], qkv[:, width:2 * width], qkv[:, 2 * width:]
        pos = lambda: torch.randn(2 * V3.span, width, device="cuda", generator=generator).to(dtype)
        self.pos_key = pos() if c2p else None
        self.pos_query = pos() if p2c else None
        self.lengths = lengths
        self.heads = heads
        self.scale = 1.0 / (head_dim * (1 + int(c2p) + int(p2c))) ** 0.5
        self.cu_seqlens = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32,
                                       device="cuda")
        longest = max(lengths)
        self.mask = torch.zeros(len(lengths), longest, dtype=torch.bool, device="cuda")
        for row, n in enumerate(lengths):
            self.mask[row, :n] = True
        index = torch.nonzero(self.mask.flatten()).flatten()
        self.index = index

        def padded(x):
            out = torch.zeros(len(lengths) * longest, width, dtype=dtype, device="cuda")
            out[index] = x
            return out.view(len(lengths), longest, width)

        self.qp, self.kp, self.vp = padded(self.q), padded(self.k), padded(self.v)

    def packed(self, lse=True):
        return ops.attention_packed(self.q, self.k, self.v, self.pos_key, self.pos_query,
                                    self.slot_table, self.positions_id, self.cu_seqlens,
                                    max(self.lengths), self.heads, self.scale, lse)

    def padded(self, lse=True):
        return ops.attention_padded(self.qp, self.kp, self.vp, self.pos_key, self.pos_query,
                                    self.slot_table, self.positions_id, self.mask, self.heads,
                                    self.scale, lse)

    def reference(self):
        as64 = lambda x: None if x is None else x.double()
        return reference.attention_packed_reference(
            self.q.double(), self.k.double(), self.v.double(), as64(self.pos_key),
            as64(self.pos_query), self.slot_table, self.positions_id, self.cu_seqlens,
            max(self.lengths), self.heads, self.scale, True)


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class EagerEntryTest(unittest.TestCase):
    """run_padded / run_packed skip the dispatcher in plain eager use and take the op elsewhere."""

    def test_direct_calls_equal_the_op_and_modes_see_the_op(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        class Recorder(TorchDispatchMode):
            def __init__(self):
                super().__init__()
                self.seen = []

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                self.seen.append(str(func))
                return func(*args, **(kwargs or {}))

        problem = Problem([5, 17, 64], 12, 64, torch.float16)
        for run, through_op in (
                (lambda: ops.run_packed(problem.q, problem.k, problem.v, problem.pos_key,
                                        problem.pos_query, problem.slot_table,
                                        problem.positions_id, problem.cu_seqlens, 64,
                                        problem.heads, problem.scale, True),
                 problem.packed),
                (lambda: ops.run_padded(problem.qp, problem.kp, problem.vp, problem.pos_key,
                                        problem.pos_query, problem.slot_table,
                                        problem.positions_id, problem.mask, problem.heads,
                                        problem.scale, True),
                 problem.padded)):
            with torch.inference_mode():
                out, lse = run()
                expected, expected_lse = through_op()
                self.assertTrue(torch.equal(out, expected))
                self.assertTrue(torch.equal(lse, expected_lse))
                recorder = Recorder()
                with recorder:
                    run()
                self.assertTrue(any("dflash.attention_" in name for name in recorder.seen),
                                recorder.seen)


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class LaunchCacheTest(unittest.TestCase):
    """run_padded / run_packed with `reuse`: one launch per problem, the same results."""

    def test_reused_launches_equal_fresh_calls_and_refit_on_change(self):
        problems = [Problem([5, 17, 64], 12, 64, torch.float16, seed=seed) for seed in (1, 2)]
        other = Problem([9, 30], 12, 64, torch.float16, seed=3)
        for layout in ("packed", "padded"):
            cache = ops.LaunchCache()

            def run(problem, reuse):
                if layout == "packed":
                    return ops.run_packed(problem.q, problem.k, problem.v, problem.pos_key,
                                          problem.pos_query, problem.slot_table,
                                          problem.positions_id, problem.cu_seqlens,
                                          max(problem.lengths), problem.heads, problem.scale,
                                          False, reuse=reuse)
                return ops.run_padded(problem.qp, problem.kp, problem.vp, problem.pos_key,
                                      problem.pos_query, problem.slot_table, problem.positions_id,
                                      problem.mask, problem.heads, problem.scale, False,
                                      reuse=reuse)

            with torch.inference_mode():
                # Two "layers": other tensors, the same layout tensors (the second problem's
                # cu_seqlens / mask are equal but other tensors, so they rebuild the launch).
                first, _ = run(problems[0], cache)
                launch = cache.launch
                again, _ = run(problems[0], cache)
                self.assertIs(cache.launch, launch)
                second, _ = run(problems[1], cache)
                self.assertIsNot(cache.launch, launch)
                changed, _ = run(other, cache)
                for got, problem in ((first, problems[0]), (again, problems[0]),
                                     (second, problems[1]), (changed, other)):
                    expected, _ = run(problem, None)
                    self.assertTrue(torch.equal(got, expected), layout)
                if layout == "padded":  # its masked V copy is kept for the next launch
                    self.assertIsNotNone(cache.launch.workspace)

    def test_layers_of_one_problem_share_one_launch(self):
        problem = Problem([5, 17, 64], 12, 64, torch.bfloat16)
        cache = ops.LaunchCache()
        with torch.inference_mode():
            for seed in range(3):
                generator = torch.Generator(device="cuda").manual_seed(seed)
                qkv = torch.randn(problem.q.size(0), 3 * problem.q.size(1), device="cuda",
                                  generator=generator).to(torch.bfloat16)
                q, k, v = qkv.chunk(3, dim=-1)
                got, _ = ops.run_packed(q, k, v, problem.pos_key, problem.pos_query,
                                        problem.slot_table, problem.positions_id,
                                        problem.cu_seqlens, max(problem.lengths), problem.heads,
                                        problem.scale, False, reuse=cache)
                if seed == 0:
                    launch = cache.launch
                self.assertIs(cache.launch, launch)
                expected, _ = ops.attention_packed(q, k, v, problem.pos_key, problem.pos_query,
                                                   problem.slot_table, problem.positions_id,
                                                   problem.cu_seqlens, max(problem.lengths),
                                                   problem.heads, problem.scale, False)
                self.assertTrue(torch.equal(got, expected))


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class OpLastLaunchTest(unittest.TestCase):
    """The op's calls (a compiled forward's layers) reuse the thread's last launch where it fits,
    and see what changed between calls."""

    def padded(self, problem, q=None, mask=None):
        q = problem.qp if q is None else q
        return ops.attention_padded(q, problem.kp, problem.vp, problem.pos_key, problem.pos_query,
                                    problem.slot_table, problem.positions_id,
                                    problem.mask if mask is None else mask, problem.heads,
                                    problem.scale, False)[0]

    def fresh(self, call):
        ops._last_launch.launch = None
        return call()

    def test_layers_reuse_and_changes_are_seen(self):
        problem = Problem([5, 17, 64], 12, 64, torch.float16)
        with torch.inference_mode():
            self.padded(problem)
            launch = ops._last_launch.launch
            # Other Q and another mask tensor of the same layout (a compiled forward's next
            # layer): the same launch, pointed at the new tensors.
            other_q = torch.randn_like(problem.qp)
            other_mask = problem.mask.clone()
            other_mask[2, 40:] = False
            got = self.padded(problem, q=other_q, mask=other_mask)
            self.assertIs(ops._last_launch.launch, launch)
            self.assertTrue(torch.equal(got, self.fresh(
                lambda: self.padded(problem, q=other_q, mask=other_mask))))
            self.assertFalse(torch.equal(got, self.fresh(lambda: self.padded(problem,
                                                                              q=other_q))))
            # The mask's values change in place: the reused launch reads them.
            self.padded(problem)
            launch = ops._last_launch.launch
            problem.mask[1, 10:] = False
            got = self.padded(problem)
            self.assertIs(ops._last_launch.launch, launch)
            self.assertTrue(torch.equal(got, self.fresh(lambda: self.padded(problem))))
            # A mask the launch converts (int64) is a copy: such a launch is not kept.
            as_long = problem.mask.long()
            got = self.padded(problem, mask=as_long)
            self.assertIsNone(ops._last_launch.launch)
            self.assertTrue(torch.equal(got, self.fresh(lambda: self.padded(problem))))

    def test_tf32_setting_is_seen(self):
        problem = Problem([33, 64], 12, 64, torch.float32)
        tf32_before = torch.backends.cuda.matmul.allow_tf32
        try:
            with torch.inference_mode():
                torch.backends.cuda.matmul.allow_tf32 = False
                strict = self.padded(problem)
                torch.backends.cuda.matmul.allow_tf32 = True
                tf32 = self.padded(problem)
                self.assertTrue(torch.equal(tf32, self.fresh(lambda: self.padded(problem))))
                self.assertFalse(torch.equal(tf32, strict))
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32_before

    def test_capture_after_reuse_replays_its_own_launch(self):
        problem = Problem([120, 64, 9], 12, 64, torch.float16)
        other = Problem([30, 8], 12, 64, torch.float16, seed=4)
        expected = self.fresh(lambda: self.padded(problem)).clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self.padded(problem)  # a last launch that fits the captured call
        torch.cuda.current_stream().wait_stream(side)
        before = ops._last_launch.launch
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured = self.padded(problem)
        self.assertIsNot(ops._last_launch.launch, before)  # a launch of its own
        self.padded(other)  # the last launch and its workspace move on
        self.padded(other)
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(captured, expected))


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class OpsTest(unittest.TestCase):
    def check(self, lengths, heads, head_dim, dtype, c2p=True, p2c=True, tf32=False):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            problem = Problem(lengths, heads, head_dim, dtype, c2p, p2c)
            expected, expected_lse = problem.reference()
            out, lse = problem.packed()
            out_padded, lse_padded = problem.padded()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
        tolerance = TOLERANCE["tf32" if tf32 else dtype]
        label = f"{lengths} {heads}x{head_dim} {dtype} c2p={c2p} p2c={p2c} tf32={tf32}"
        self.assertLess(relative_l2(out, expected), tolerance, label)
        self.assertLess(relative_l2(lse, expected_lse), tolerance, label)
        # Padded == packed on the real rows.
        rows = out_padded.view(-1, out.size(1))[problem.index]
        self.assertLess(relative_l2(rows, out), tolerance, label)
        lse_rows = lse_padded.reshape(heads, -1)[:, problem.index]
        self.assertLess(relative_l2(lse_rows, lse), tolerance, label)

    def test_half_precision_head_dims_and_terms(self):
        for dtype, head_dim in itertools.product((torch.float16, torch.bfloat16), (32, 64, 128)):
            for c2p, p2c in ((True, True), (True, False), (False, True), (False, False)):
                self.check([130, 7, 64, 300], 768 // head_dim, head_dim, dtype, c2p, p2c)

    def test_long_sequences_saturate(self):
        self.check([1500, 600], 12, 64, torch.bfloat16)
        self.check([1100], 6, 128, torch.float16)

    def test_float32_strict_and_tf32(self):
        self.check([200, 33], 12, 64, torch.float32)
        self.check([200, 33], 12, 64, torch.float32, tf32=True)

    def test_no_lse_requested(self):
        problem = Problem([40, 9], 12, 64, torch.float16)
        out, lse = problem.packed(lse=False)
        self.assertEqual(lse.numel(), 0)
        self.assertTrue(torch.equal(out, problem.packed()[0]))

    def test_no_host_synchronisation(self):
        problem = Problem([100, 50, 77], 12, 64, torch.float16)
        problem.packed()  # first call: library load, profile, cuBLAS handle
        problem.padded()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            problem.packed()
            problem.padded()
        finally:
            torch.cuda.set_sync_debug_mode("default")

    def test_runs_on_the_current_stream(self):
        problem = Problem([256, 31], 12, 64, torch.bfloat16)
        expected = problem.packed()[0]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(100_000_000)  # the inputs below exist only late on this stream
            q, k, v = problem.q.clone(), problem.k.clone(), problem.v.clone()
            got, _ = ops.attention_packed(q, k, v, problem.pos_key, problem.pos_query,
                                          problem.slot_table, problem.positions_id,
                                          problem.cu_seqlens, max(problem.lengths),
                                          problem.heads, problem.scale, False)
        torch.cuda.current_stream().wait_stream(side)
        self.assertTrue(torch.equal(got, expected))

    def test_cuda_graph_capture(self):
        problem = Problem([120, 64, 9], 12, 64, torch.float16)
        expected = problem.padded()[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            problem.padded()  # warm-up on the capture stream
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            captured, _ = problem.padded()
        problem.qp.mul_(1.0)  # inputs unchanged; replay must reproduce
        graph.replay()
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(captured, expected))

    def test_unsupported_head_dim_is_refused(self):
        q = torch.zeros(4, 96, dtype=torch.float16, device="cuda")
        cu = torch.tensor([0, 4], dtype=torch.int32, device="cuda")
        with self.assertRaisesRegex(ValueError, "head dim"):
            ops.attention_packed(q, q, q, None, None, None, -1, cu, 4, 2, 0.1, False)


def random_model(shape="v3", dtype=torch.float32, **overrides):
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification
    values = dict(vocab_size=1000, hidden_size=384, num_hidden_layers=3, num_attention_heads=6,
                  intermediate_size=768, max_position_embeddings=512, relative_attention=True,
                  position_buckets=256, pos_att_type=["p2c", "c2p"], share_att_key=True,
                  norm_rel_ebd="layer_norm", position_biased_input=False, type_vocab_size=0,
                  num_labels=3)
    if shape == "v2":
        values.update(position_buckets=-1, max_relative_positions=-1, share_att_key=False,
                      conv_kernel_size=3, conv_act="gelu", norm_rel_ebd="none")
    values.update(overrides)
    torch.manual_seed(0)
    return DebertaV2ForSequenceClassification(DebertaV2Config(**values)).eval().to("cuda", dtype)


def random_batch(lengths, vocab=1000, seed=0):
    generator = torch.Generator().manual_seed(seed)
    longest = max(lengths)
    ids = torch.randint(4, vocab, (len(lengths), longest), generator=generator)
    mask = torch.zeros(len(lengths), longest, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return (ids * mask).cuda(), mask.cuda()


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class OptimizeDebertaOnGpuTest(unittest.TestCase):
    def setUp(self):
        deberta.reset_fallback_warnings()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    def test_float32_parity_padded_and_packed(self):
        for shape in ("v3", "v2"):
            model = random_model(shape)
            ids, mask = random_batch([77, 12, 130, 5])
            with torch.no_grad():
                expected = model(input_ids=ids, attention_mask=mask).logits
                results = {}
                for layout in ("padded", "packed"):
                    dflash_torch.optimize_deberta(model, layout=layout, fallback="error")
                    results[layout] = model(input_ids=ids, attention_mask=mask).logits
                    dflash_torch.restore_deberta(model)
            for layout, got in results.items():
                self.assertLess(relative_l2(got, expected), 1e-4, f"{shape} {layout}")
            self.assertLess(relative_l2(results["padded"], results["packed"]), 1e-5, shape)

    def test_half_precision_no_worse_than_transformers(self):
        model = random_model()
        ids, mask = random_batch([60, 33, 128])
        with torch.no_grad():
            reference_logits = model(input_ids=ids, attention_mask=mask).logits
            for dtype in (torch.float16, torch.bfloat16):
                half = copy.deepcopy(model).to(dtype)
                stock = half(input_ids=ids, attention_mask=mask).logits
                dflash_torch.optimize_deberta(half, fallback="error")
                ours = half(input_ids=ids, attention_mask=mask).logits
                stock_error = relative_l2(stock, reference_logits)
                ours_error = relative_l2(ours, reference_logits)
                self.assertLessEqual(ours_error, max(1.5 * stock_error, 1e-3), str(dtype))

    def test_compile_and_cuda_graphs_give_the_same_outputs(self):
        torch._dynamo.reset()  # Four compiles of one forward: start from no cached graphs.
        ids, mask = random_batch([64, 64, 40, 17])
        # float32: inductor's fused kernels round as eager does to about 1e-6, so a real
        # difference (a wrong stride, a stale graph input) shows.
        model = random_model(dtype=torch.float32)
        dflash_torch.optimize_deberta(model, fallback="error")
        with torch.no_grad():
            eager = model(input_ids=ids, attention_mask=mask).logits
            compiled = torch.compile(model, fullgraph=True)
            self.assertLess(relative_l2(compiled(input_ids=ids, attention_mask=mask).logits,
                                        eager), 1e-5)
            graphed = torch.compile(model, mode="reduce-overhead", fullgraph=True)
            for _ in range(3):  # warm-up, record, replay
                got = graphed(input_ids=ids, attention_mask=mask).logits.clone()
            self.assertLess(relative_l2(got, eager), 1e-5)
        # float16: inductor also reorders the half-precision arithmetic around attention, so the
        # patched model may drift from its eager self as much as the stock model drifts from its
        # own (twice that, floor 1e-3), no more.
        stock = random_model(dtype=torch.float16)
        model = copy.deepcopy(stock)
        dflash_torch.optimize_deberta(model, fallback="error")
        with torch.no_grad():
            drifts = []
            for candidate in (stock, model):
                eager = candidate(input_ids=ids, attention_mask=mask).logits
                compiled = torch.compile(candidate, fullgraph=True)
                drifts.append(relative_l2(compiled(input_ids=ids, attention_mask=mask).logits,
                                          eager))
            self.assertLess(drifts[1], max(2 * drifts[0], 1e-3), drifts)

    def test_fallbacks_on_gpu(self):
        model = random_model()
        stock = copy.deepcopy(model)
        dflash_torch.optimize_deberta(model)
        ids, mask = random_batch([20, 9])
        cases = [("gradients", dict(), True), ("output_attentions", dict(output_attentions=True),
                                               False)]
        for reason, kwargs, grad in cases:
            with torch.set_grad_enabled(grad), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                got = model(input_ids=ids, attention_mask=mask, **kwargs).logits
                expected = stock(input_ids=ids, attention_mask=mask, **kwargs).logits
            self.assertTrue(torch.equal(got, expected), reason)
            self.assertTrue(any(reason in str(w.message) for w in caught), reason)


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class CudaGraphsTest(unittest.TestCase):
    """optimize_deberta(..., cuda_graphs=True): recorded per rounded shape, replayed, outputs
    owned by the caller, recorded again when the encoder changes, eager where a graph cannot."""

    def setUp(self):
        deberta.reset_fallback_warnings()
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    @staticmethod
    def pair(shape="v3", dtype=torch.float32, layout="padded", **options):
        eager = random_model(shape, dtype)
        dflash_torch.optimize_deberta(eager, layout=layout, fallback="error")
        graphed = copy.deepcopy(eager)
        dflash_torch.optimize_deberta(graphed, layout=layout, fallback="error", cuda_graphs=True,
                                      **options)
        return eager, graphed, graphed.deberta.encoder._dflash_graphs

    def assert_same(self, got, expected, tolerance, message=""):
        self.assertEqual(got.shape, expected.shape, message)
        self.assertLess(relative_l2(got, expected), tolerance, message)

    def assert_same_outputs(self, got, expected, mask, tolerance, message):
        """Logits and every hidden state's real positions."""
        self.assert_same(got.logits, expected.logits, tolerance, message)
        self.assertEqual(len(got.hidden_states), len(expected.hidden_states))
        keep = mask.bool()
        for ours, theirs in zip(got.hidden_states, expected.hidden_states):
            self.assert_same(ours[keep], theirs[keep], tolerance, message)

    def test_replays_match_the_eager_forward(self):
        for shape, dtype, tolerance in (("v3", torch.float32, 1e-5), ("v2", torch.float32, 1e-5),
                                        ("v3", torch.float16, 2e-3)):
            eager, graphed, graphs = self.pair(shape, dtype)
            batches = [[77, 12, 130, 5], [70, 3, 128, 9], [20, 20, 20, 20], [16] * 4, [33, 1]]
            with torch.inference_mode():
                for lengths in batches + batches:
                    ids, mask = random_batch(lengths, seed=len(lengths) + max(lengths))
                    expected = eager(input_ids=ids, attention_mask=mask,
                                     output_hidden_states=True)
                    got = graphed(input_ids=ids, attention_mask=mask, output_hidden_states=True)
                    self.assert_same_outputs(got, expected, mask, tolerance,
                                             f"{shape} {dtype} {lengths}")
            # Lengths 130 and 128 round to 144 and 128 (multiple 16); 20 and 16 to 32 and 16;
            # the batch of two is another key: five graphs, each recorded once.
            self.assertEqual((graphs.recorded, len(graphs)), (5, 5), f"{shape} {dtype}")

    def test_packed_replays_match_the_eager_forward(self):
        for shape, dtype, tolerance in (("v3", torch.float32, 1e-5), ("v2", torch.float32, 1e-5),
                                        ("v3", torch.float16, 2e-3)):
            eager, graphed, graphs = self.pair(shape, dtype, layout="packed")
            batches = [[77, 12, 130, 5], [70, 3, 128, 9], [20, 20, 20, 20], [16] * 4, [33, 1]]
            kept = None
            with torch.inference_mode():
                for given in (False, True, True):
                    for lengths in batches:
                        ids, mask = random_batch(lengths, seed=len(lengths) + max(lengths))
                        expected = eager(input_ids=ids, attention_mask=mask,
                                         output_hidden_states=True)
                        # The layout from the host copy of the mask (no device read), or built
                        # by the encoder from the device mask.
                        layout = (dflash_torch.use_packed_layout(
                            packing.packed_layout(mask.cpu())) if given
                            else contextlib.nullcontext())
                        with layout:
                            got = graphed(input_ids=ids, attention_mask=mask,
                                          output_hidden_states=True)
                        message = f"{shape} {dtype} {lengths} given={given}"
                        self.assert_same_outputs(got, expected, mask, tolerance, message)
                        for ours in got.hidden_states[1:]:  # packed: zeros at padding
                            self.assertEqual(float(ours[~mask.bool()].abs().sum()), 0.0, message)
                        if kept is None and given:  # a replay's outputs, checked after others
                            kept = (got.hidden_states, [h.clone() for h in got.hidden_states])
            for now, then in zip(*kept):
                self.assertTrue(torch.equal(now, then), f"{shape} {dtype}")
            # Keys (batch, length and longest sequence rounded to 64, tokens by tokens_key):
            # (4, 192, 224), (4, 128, 224), (4, 64, 80), (4, 64, 64), (2, 64, 48).
            self.assertEqual((graphs.recorded, len(graphs)), (5, 5), f"{shape} {dtype}")

    def test_outputs_survive_later_replays(self):
        _, graphed, graphs = self.pair()
        mask = random_batch([40, 40])[1]
        ids = [random_batch([40, 40], seed=seed)[0] for seed in (1, 2, 3)]
        with torch.no_grad():
            graphed(input_ids=ids[0], attention_mask=mask)  # recorded (this one runs eagerly)
            first = graphed(input_ids=ids[1], attention_mask=mask, output_hidden_states=True)
            kept = [h.clone() for h in first.hidden_states]
            second = graphed(input_ids=ids[2], attention_mask=mask, output_hidden_states=True)
        self.assertEqual(graphs.recorded, 1)
        for index, (now, then) in enumerate(zip(first.hidden_states, kept)):
            self.assertTrue(torch.equal(now, then), index)
        self.assertFalse(torch.equal(first.hidden_states[-1], second.hidden_states[-1]))
        # The last layer's states are a tensor of their own, not a view of every layer's.
        last = second.hidden_states[-1]
        self.assertEqual(last.untyped_storage().nbytes(), last.numel() * last.element_size())

    def test_model_prepared_in_inference_mode_and_copied(self):
        eager = random_model()
        dflash_torch.optimize_deberta(eager, fallback="error")
        graphed = random_model()
        with torch.inference_mode():  # the slot table is made here: an inference tensor?
            dflash_torch.optimize_deberta(graphed, fallback="error", cuda_graphs=True)
        ids, mask = random_batch([25, 9], seed=8)
        with torch.inference_mode():
            expected = eager(input_ids=ids, attention_mask=mask).logits
            for _ in range(2):
                self.assert_same(graphed(input_ids=ids, attention_mask=mask).logits, expected,
                                 1e-5)
            copied = copy.deepcopy(graphed)  # after recording: the copy records its own
            for _ in range(2):
                self.assert_same(copied(input_ids=ids, attention_mask=mask).logits, expected,
                                 1e-5)
        self.assertEqual(graphed.deberta.encoder._dflash_graphs.recorded, 1)
        self.assertEqual(copied.deberta.encoder._dflash_graphs.recorded, 1)

    def test_encoder_called_for_its_last_states_only(self):
        eager, graphed, graphs = self.pair()
        ids, mask = random_batch([45, 30], seed=7)
        with torch.no_grad():
            hidden = eager.deberta.embeddings(input_ids=ids, mask=mask)
            expected = eager.deberta.encoder(hidden, mask, output_hidden_states=False)
            for _ in range(2):  # recorded, replayed
                got = graphed.deberta.encoder(hidden, mask, output_hidden_states=False)
        self.assertIsNone(got.hidden_states)
        self.assert_same(got.last_hidden_state[mask.bool()],
                         expected.last_hidden_state[mask.bool()], 1e-5)
        self.assertEqual(graphs.recorded, 1)

    def test_changed_weights_and_dtype_are_recorded_again(self):
        eager, graphed, graphs = self.pair()
        ids, mask = random_batch([50, 21, 7], seed=3)
        other = random_model()
        torch.manual_seed(5)
        other.load_state_dict({k: torch.randn_like(v) * 0.05 if v.is_floating_point() else v
                               for k, v in other.state_dict().items()})
        with torch.no_grad():
            for _ in range(2):  # recorded, replayed
                graphed(input_ids=ids, attention_mask=mask)
            for model in (eager, graphed):
                model.load_state_dict(other.state_dict())
            for _ in range(2):  # recorded again (the stamp changed), replayed
                self.assert_same(graphed(input_ids=ids, attention_mask=mask).logits,
                                 eager(input_ids=ids, attention_mask=mask).logits, 1e-5,
                                 "loaded")
            self.assertEqual(graphs.recorded, 2)
            for model in (eager, graphed):
                model.to(torch.float16)
            for _ in range(2):
                self.assert_same(graphed(input_ids=ids, attention_mask=mask).logits,
                                 eager(input_ids=ids, attention_mask=mask).logits, 2e-3,
                                 "float16")
            self.assertEqual(graphs.recorded, 3)
        self.assertEqual(dflash_torch.reset_graphs(graphed), 1)
        self.assertEqual(len(graphs), 0)

    def test_hooks_run_eagerly(self):
        eager, graphed, graphs = self.pair()
        ids, mask = random_batch([30, 12], seed=4)
        calls = []
        handle = graphed.deberta.encoder.layer[1].intermediate.register_forward_hook(
            lambda *args: calls.append(1))
        with torch.no_grad():
            got = graphed(input_ids=ids, attention_mask=mask).logits
            graphed(input_ids=ids, attention_mask=mask)
            self.assertEqual((len(calls), graphs.recorded), (2, 0))
            handle.remove()
            graphed(input_ids=ids, attention_mask=mask)
            self.assertEqual(graphs.recorded, 1)
            self.assert_same(got, eager(input_ids=ids, attention_mask=mask).logits, 1e-5)

    def test_other_streams_and_the_callers_capture(self):
        eager, graphed, graphs = self.pair()
        ids, mask = random_batch([60, 31, 2], seed=6)
        with torch.no_grad():
            expected = eager(input_ids=ids, attention_mask=mask).logits
            graphed(input_ids=ids, attention_mask=mask)
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                got = graphed(input_ids=ids, attention_mask=mask).logits
            torch.cuda.current_stream().wait_stream(side)
            self.assert_same(got, expected, 1e-5, "side stream")
            # Inside the caller's own capture the eager forward is what gets captured.
            capture_stream = torch.cuda.Stream()
            capture_stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(capture_stream):  # the warm-up torch.cuda.graph asks for
                graphed(input_ids=ids, attention_mask=mask)
            torch.cuda.current_stream().wait_stream(capture_stream)
            outer = torch.cuda.CUDAGraph()
            with torch.cuda.graph(outer, stream=capture_stream):
                captured = graphed(input_ids=ids, attention_mask=mask).logits
            outer.replay()
            torch.cuda.synchronize()
            self.assert_same(captured, expected, 1e-5, "caller's capture")
        self.assertEqual(graphs.recorded, 1)

    def test_one_graph_over_max_graphs_drops_them_all(self):
        eager, graphed, graphs = self.pair(max_graphs=2, graph_length_multiple=8)
        kept = []
        with torch.no_grad():
            # 8, 16: two graphs; 24: a third, so all go; 8 and 16 again: recorded again and
            # replayed (after the eviction freed what it could, nothing recorded in between).
            for length in (8, 16, 24, 8, 16, 8, 16):
                ids, mask = random_batch([length, length - 3], seed=length)
                self.assert_same(graphed(input_ids=ids, attention_mask=mask).logits,
                                 eager(input_ids=ids, attention_mask=mask).logits, 1e-5,
                                 str(length))
                kept.append(len(graphs))
        self.assertEqual(kept, [1, 2, 0, 1, 2, 2, 2])
        self.assertEqual(graphs.recorded, 5)


@unittest.skipUnless(HAVE_GPU, "needs a CUDA device and libdflash_attention")
class DeterministicAlgorithmsTest(unittest.TestCase):
    """torch.use_deterministic_algorithms(True): every path runs, and since that mode fills new
    memory with NaN, an output element the op or the packing leaves unwritten, or a masked key's
    value multiplied in with weight zero, shows as a non-finite state."""

    @contextlib.contextmanager
    def deterministic(self):
        settings = torch.utils.deterministic  # a property, which mock.patch.object can't restore
        saved = (torch.are_deterministic_algorithms_enabled(), settings.fill_uninitialized_memory)
        # cuBLAS refuses deterministic mode without a fixed workspace configuration.
        with mock.patch.dict(os.environ, {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}):
            torch.use_deterministic_algorithms(True)
            settings.fill_uninitialized_memory = True
            try:
                yield
            finally:
                torch.use_deterministic_algorithms(saved[0])
                settings.fill_uninitialized_memory = saved[1]

    def test_every_layout_runs_and_writes_every_state(self):
        torch.backends.cuda.matmul.allow_tf32 = False
        stock = random_model()
        ids, mask = random_batch([77, 12, 130, 5], seed=11)
        keep = mask.bool()
        with torch.no_grad():
            expected = stock(input_ids=ids, attention_mask=mask, output_hidden_states=True)
        for layout, graphs in itertools.product(("padded", "packed"), (False, True)):
            model = copy.deepcopy(stock)
            dflash_torch.optimize_deberta(model, layout=layout, fallback="error",
                                          cuda_graphs=graphs)
            message = f"{layout} cuda_graphs={graphs}"
            with self.deterministic(), torch.no_grad():
                runs = [model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
                        for _ in range(3)]  # graphs: eager while recording, then replays
            for got in runs:
                self.assertLess(relative_l2(got.logits, expected.logits), 1e-4, message)
                for ours, theirs in zip(got.hidden_states, expected.hidden_states):
                    self.assertTrue(bool(torch.isfinite(ours).all()), message)
                    self.assertLess(relative_l2(ours[keep], theirs[keep]), 1e-4, message)
            # Deterministic: the runs agree bit for bit.
            for got in runs[1:]:
                self.assertTrue(torch.equal(got.logits, runs[0].logits), message)


if __name__ == "__main__":
    unittest.main()
