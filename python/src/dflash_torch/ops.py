"""The fused disentangled-attention forward as PyTorch custom ops (torch.library).

Two ops, one per layout, both returning (out, lse), in the namespace "dflash" (torch.ops.dflash;
a Hub build has its own, _namespace.py):

  dflash::attention_padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask,
                           num_heads, scale, return_lse)
      q, k, v: [B, L, H*d] (best: token rows at one row stride, unit column stride, 16-byte
      aligned; other layouts are copied); key_mask: [B, L], 0 removes a key. out: [B, L, H*d];
      lse: float32 [H, B, L].
  dflash::attention_packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens,
                           max_seqlen, num_heads, scale, return_lse)
      q, k, v: [T, H*d]; cu_seqlens: int32 [B + 1]; max_seqlen: the longest sequence (a host int,
      so that no call reads the device). out: [T, H*d]; lse: float32 [H, T].

pos_key / pos_query are the layer's projections of the relative embeddings, [2k, H*d] (None drops
c2p / p2c); slot_table is the model's int32 idx table on the device and positions_id the id of its
host copy (register_slot_table). lse is the natural-log log-sum-exp of each row's scaled scores,
what a fused backward needs; with return_lse=False it is an empty tensor and the kernel skips it.

The patched DeBERTa layers call run_padded / run_packed: the ops, except in plain eager use on
CUDA tensors (no tracing, dispatch mode or autograd), where they call the implementation without
the dispatcher, whose wrappers cost about a third of a call's host time at small shapes. Given a
LaunchCache, such calls reuse the previous call's checked arguments and workspace where the
problem is the same (the layers of one forward): they then only set addresses and launch.

The real implementation runs on the caller's current stream, allocates its workspace through
PyTorch's caching allocator and never synchronises, so the ops can be captured in CUDA graphs; the
fake implementations give torch.compile shapes and dtypes without running anything. float32
inputs run the TF32 kernel when torch allows TF32 matmuls at call time, else the strict one.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import warnings

import torch

from . import _native, profiles
from ._namespace import NAMESPACE
from .relative_positions import SlotTable

_DTYPES = {torch.float16: (_native.FLOAT16, "fp16"), torch.bfloat16: (_native.BFLOAT16, "bf16"),
           torch.float32: (_native.FLOAT32, "fp32")}
SUPPORTED_HEAD_DIMS = (32, 64, 128)

# Python-side ids of slot tables; their host copies reach the library at the first real call.
_slot_tables: list[SlotTable] = []
_slot_tables_lock = threading.Lock()


def register_slot_table(table: SlotTable) -> int:
    """The positions_id for `table` (equal tables share one)."""
    with _slot_tables_lock:
        for index, known in enumerate(_slot_tables):
            if known == table:
                return index
        _slot_tables.append(table)
        return len(_slot_tables) - 1


_native_ids: dict[tuple[int, int], int] = {}


def _native_positions_id(library: _native.Library, positions_id: int, table: SlotTable) -> int:
    """The library's id of a registered table, registering its host copy at the first call."""
    key = (id(library), positions_id)
    found = _native_ids.get(key)
    if found is None:
        found = library.register_positions(table.table, table.band, table.span)
        _native_ids[key] = found
    return found


def registered_slot_table(positions_id: int) -> SlotTable:
    with _slot_tables_lock:
        if not 0 <= positions_id < len(_slot_tables):
            raise ValueError(f"unknown positions_id {positions_id}")
        return _slot_tables[positions_id]


class _Tuning:
    """Kernel variant per (device, family): the device's tuning profile entry when it applies,
    else the built-in heuristic (config None)."""

    def __init__(self):
        self._profiles: dict[int, profiles.Profile | None] = {}
        self._configs: dict[tuple[int, str], _native.Config | None] = {}
        self._lock = threading.Lock()

    def profile(self, library: _native.Library, device: int) -> profiles.Profile | None:
        if device not in self._profiles:
            properties = torch.cuda.get_device_properties(device)
            cuda = divmod(library.cuda_version // 10, 100)
            self._profiles[device] = profiles.select_profile(
                properties.name, (properties.major, properties.minor), cuda)
        return self._profiles[device]

    def config(self, library: _native.Library, device: int, family: str,
               args: _native.Args) -> _native.Config | None:
        key = (device, family)
        with self._lock:
            if key in self._configs:
                return self._configs[key]
            chosen = None
            profile = self.profile(library, device)
            entry = profile.entries.get(family) if profile is not None else None
            if entry is not None:
                candidate = _native.make_config(entry.windows, entry.mma, entry.min_blocks_per_sm,
                                                entry.key_groups, entry.block_m, entry.block_n,
                                                entry.warps)
                if library.config_applies(args, candidate):
                    chosen = candidate
                else:
                    warnings.warn(f"dflash_torch: {profile.source}: the entry for {family} does "
                                  "not apply on this device or build; the heuristic runs",
                                  RuntimeWarning, stacklevel=3)
            self._configs[key] = chosen
            return chosen

    def describe(self, device: int) -> str:
        library = _native.require()
        profile = self.profile(library, device)
        return "heuristic (no profile)" if profile is None else f"{profile.name} ({profile.source})"


tuning = _Tuning()


def allow_tf32() -> bool:
    matmul = torch.backends.cuda.matmul
    precision = getattr(matmul, "fp32_precision", None)
    if precision is not None and precision != "none":
        return precision == "tf32"
    return bool(matmul.allow_tf32)


def _row_stride(x: torch.Tensor, rows_dim: int) -> int | None:
    """The stride in elements between `x`'s token rows, or None where the kernel cannot take its
    layout as it is (a compiler may hand the op other strides than eager code): no unit column
    stride, rows of a padded batch not at one stride, or a stride not a multiple of 8 elements.
    The rows' 16-byte alignment depends on the address, which _Launch checks per call."""
    stride = x.stride(rows_dim)
    uniform = rows_dim == 0 or x.size(0) <= 1 or x.stride(0) == x.size(1) * stride
    if x.stride(-1) != 1 or not uniform or stride % 8:
        return None
    return stride


if hasattr(torch._C, "_cuda_getCurrentRawStream"):
    _current_stream = torch._C._cuda_getCurrentRawStream  # The handle alone: no Stream object.
else:
    def _current_stream(device: int) -> int:
        return torch.cuda.current_stream(device).cuda_stream


def _on_device(device: torch.device):
    """torch.cuda.device(device) where it is not already the current device (the switch and its
    undo cost more host time than the check)."""
    if device.index is None or device.index == torch.cuda.current_device():
        return contextlib.nullcontext()
    return torch.cuda.device(device)


class _Launch:
    """The C interface's arguments for one attention problem, checked and built once. Calling it
    runs the problem on given Q / K / V / PosK / PosQ; `fits` says whether other tensors make the
    same problem (shapes, strides, dtype, device; the same layout and table tensors), so the
    layers of one encoder forward, which differ only in their tensors' addresses, reuse one
    launch and its workspace (LaunchCache)."""

    def __init__(self, q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                 return_lse, key_mask=None, cu_seqlens=None, max_seqlen=0):
        padded = key_mask is not None
        hd = q.size(-1)
        self.shape, self.dtype, self.device = q.shape, q.dtype, q.device
        self.return_lse = return_lse
        rows = q.size(0) * q.size(1) if padded else q.size(0)
        self.lse_shape = (((num_heads, q.size(0), q.size(1)) if padded else (num_heads, q.size(0)))
                          if return_lse else (0,))
        self.empty = rows == 0
        self.signature = self._signature(q, k, v, pos_key, pos_query)
        self.same_tensors = (slot_table, key_mask, cu_seqlens)
        self.same_values = (positions_id, max_seqlen, num_heads, scale, return_lse)
        self.layout_signature = self._layout_signature(self.same_tensors)
        self.tuning = tuning
        self.own_layout = True  # the kernel reads the caller's layout tensors, not copies
        self.workspace = self.workspace_stream = None
        self.no_lse = None if return_lse else torch.empty(0, dtype=torch.float32, device=q.device)
        if self.empty:
            return
        if q.dtype not in _DTYPES or k.dtype != q.dtype or v.dtype != q.dtype:
            raise ValueError(f"q, k, v must share one of float16, bfloat16, float32; got {q.dtype}")
        if hd % num_heads != 0 or hd // num_heads not in SUPPORTED_HEAD_DIMS:
            raise ValueError(f"head dim {hd} / {num_heads} is not one of {SUPPORTED_HEAD_DIMS}")
        self.library = library = _native.require()
        device = q.device.index if q.device.index is not None else torch.cuda.current_device()
        self.device_index = device
        rows_dim = 1 if padded else 0
        dtype_code, dtype_name = _DTYPES[q.dtype]
        self.args = args = _native.Args()
        args.struct_size = ctypes.sizeof(_native.Args)
        args.device = device
        args.dtype = dtype_code
        args.allow_tf32 = int(q.dtype == torch.float32 and allow_tf32())
        args.num_heads = num_heads
        args.head_dim = hd // num_heads
        strides = tuple(_row_stride(x, rows_dim) for x in (q, k, v))
        self.row_strides = None if None in strides else strides
        self.rows_dim = rows_dim
        args.out_row_stride = hd
        if pos_key is not None or pos_query is not None:
            for name, pos in (("pos_key", pos_key), ("pos_query", pos_query)):
                if pos is not None and (pos.dtype != q.dtype or pos.dim() != 2
                                        or pos.size(1) != hd):
                    raise ValueError(f"{name} must be a [2k, {hd}] {q.dtype} tensor")
            if slot_table is None or slot_table.dtype != torch.int32:
                raise ValueError("position terms need the int32 slot_table")
            table = registered_slot_table(positions_id)
            if slot_table.numel() != len(table.table):
                raise ValueError(f"slot_table has {slot_table.numel()} entries; positions_id "
                                 f"{positions_id} has {len(table.table)}")
            args.positions_id = _native_positions_id(library, positions_id, table)
            args.slot_table = slot_table.data_ptr()
        self.reads_slot_table = bool(args.slot_table)
        if padded:
            given = key_mask
            if key_mask.dtype not in (torch.bool, torch.uint8):
                key_mask = key_mask != 0
            self.key_mask = key_mask = key_mask.contiguous()
            self.own_layout = key_mask is given
            args.key_padding_mask = key_mask.data_ptr()
            args.num_sequences = q.size(0)
            args.padded_length = q.size(1)
            longest = q.size(1)
        else:
            given = cu_seqlens
            self.cu_seqlens = cu_seqlens = cu_seqlens.to(torch.int32).contiguous()
            self.own_layout = cu_seqlens is given
            args.cu_seqlens = cu_seqlens.data_ptr()
            args.num_sequences = cu_seqlens.numel() - 1
            args.max_seqlen = max_seqlen
            args.total_tokens = q.size(0)
            longest = max_seqlen
        args.scale = scale
        self.family = profiles.family_key(dtype_name, args.head_dim, padded, pos_key is not None,
                                          pos_query is not None, longest)
        self.workspace_bytes = None  # at the first call, whose addresses the checks see

    @staticmethod
    def _signature(q, k, v, pos_key, pos_query):
        return (q.shape, q.stride(), k.shape, k.stride(), v.shape, v.stride(), q.dtype, k.dtype,
                v.dtype, q.device,
                None if pos_key is None else (pos_key.shape, pos_key.stride(), pos_key.dtype),
                None if pos_query is None else (pos_query.shape, pos_query.stride(),
                                                pos_query.dtype))

    def fits(self, q, k, v, pos_key, pos_query, same_tensors, same_values) -> bool:
        """Whether these arguments make this launch's problem (its layout and table tensors
        themselves, equal scalars, equal shapes, strides, dtypes and device)."""
        return (all(a is b for a, b in zip(same_tensors, self.same_tensors))
                and same_values == self.same_values
                and self._signature(q, k, v, pos_key, pos_query) == self.signature)

    @staticmethod
    def _layout_signature(tensors):
        return tuple(None if t is None else (t.shape, t.stride(), t.dtype, t.device)
                     for t in tensors)

    def fits_other_layout(self, q, k, v, pos_key, pos_query, same_tensors, same_values) -> bool:
        """Whether these arguments make this launch's problem with other layout and table
        tensors of the same shapes, strides, dtypes and device, and the same TF32 setting and
        tuning. Only for a launch that reads its layout tensors as they are (none copied by
        conversion, so the caller's next tensors need none either); such a call passes them to
        __call__, which points the launch at them."""
        return (self.own_layout and self.tuning is tuning and same_values == self.same_values
                and self._signature(q, k, v, pos_key, pos_query) == self.signature
                and self._layout_signature(same_tensors) == self.layout_signature
                and (self.empty or self.dtype != torch.float32
                     or self.args.allow_tf32 == int(allow_tf32())))

    def release_tensors(self) -> None:
        """Drops the launch's references to its layout and table tensors, so that keeping it
        (the op's last launch) keeps no caller's memory alive; fits() matches nothing after."""
        self.same_tensors = (_RELEASED,) * 3
        self.key_mask = self.cu_seqlens = self.no_lse = None

    def __call__(self, q, k, v, pos_key, pos_query, keep_workspace=False, layout_tensors=None):
        out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        # One empty lse serves the layers of one forward; each op call returns its own.
        lse = (self.no_lse if keep_workspace and self.no_lse is not None
               else torch.empty(self.lse_shape, dtype=torch.float32, device=self.device))
        if self.empty:
            return out, lse
        args = self.args
        if layout_tensors is not None:  # fits_other_layout: same metadata, other tensors
            slot_table, key_mask, cu_seqlens = layout_tensors
            if self.reads_slot_table:
                args.slot_table = slot_table.data_ptr()
            if key_mask is not None:
                args.key_padding_mask = key_mask.data_ptr()
            else:
                args.cu_seqlens = cu_seqlens.data_ptr()
        pointers = q.data_ptr(), k.data_ptr(), v.data_ptr()
        strides = self.row_strides
        if strides is None or (pointers[0] | pointers[1] | pointers[2]) % 16:
            # A layout the kernel cannot take as it is (_row_stride) or unaligned rows: copies.
            q, k, v = (x.clone(memory_format=torch.contiguous_format) for x in (q, k, v))
            pointers = q.data_ptr(), k.data_ptr(), v.data_ptr()
            strides = (q.stride(self.rows_dim),) * 3
        args.q, args.k, args.v = pointers
        args.q_row_stride, args.k_row_stride, args.v_row_stride = strides
        args.out = out.data_ptr()
        args.pos_key = pos_key.contiguous().data_ptr() if pos_key is not None else None
        args.pos_query = pos_query.contiguous().data_ptr() if pos_query is not None else None
        args.lse = lse.data_ptr() if self.return_lse else None
        if self.workspace_bytes is None:
            config = tuning.config(self.library, self.device_index, self.family, args)
            if config is not None:
                self.config = config
                args.config = ctypes.pointer(config)
            self.workspace_bytes = self.library.workspace_bytes(args)
        stream = _current_stream(self.device_index)
        workspace = self.workspace if stream == self.workspace_stream else None
        if workspace is None and self.workspace_bytes:
            # The caching allocator's blocks are 512-byte aligned and stream-ordered: no
            # synchronisation. A kept workspace serves later launches on the same stream only,
            # which run after this one.
            workspace = torch.empty(self.workspace_bytes, dtype=torch.uint8, device=self.device)
            if keep_workspace:
                self.workspace, self.workspace_stream = workspace, stream
        self.library.forward(args, workspace.data_ptr() if workspace is not None else None,
                             self.workspace_bytes, stream)
        return out, lse


_RELEASED = object()  # what a released launch's fits() compares with: no tensor is it


class _LastLaunch(threading.local):
    """The op's last launch, per thread (_forward)."""

    def __init__(self):
        self.launch: _Launch | None = None


_last_launch = _LastLaunch()


def _forward(q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale, return_lse,
             *, key_mask=None, cu_seqlens=None, max_seqlen=0):
    """One call of the op. A call that repeats the thread's previous problem on other tensors
    (the layers of a compiled forward, which call the op through the dispatcher with no
    LaunchCache, and whose compiler hands each call a mask of its own) reuses its checked
    arguments, not its workspace. Never while a CUDA graph records: a recorded launch must not
    depend on what ran before the capture."""
    last = _last_launch.launch
    layout_tensors = (slot_table, key_mask, cu_seqlens)
    if last is not None and not torch.cuda.is_current_stream_capturing() and (
            last.fits_other_layout(q, k, v, pos_key, pos_query, layout_tensors,
                                   (positions_id, max_seqlen, num_heads, scale, return_lse))):
        return last(q, k, v, pos_key, pos_query, layout_tensors=layout_tensors)
    launch = _Launch(q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                     return_lse, key_mask, cu_seqlens, max_seqlen)
    result = launch(q, k, v, pos_key, pos_query)
    launch.release_tensors()
    _last_launch.launch = launch if launch.own_layout else None
    return result


def _padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask, num_heads, scale,
            return_lse):
    """attention_padded's implementation (the op's, and run_padded's in plain eager use)."""
    with _on_device(q.device):
        return _forward(q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                        return_lse, key_mask=key_mask)


def _packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens, max_seqlen,
            num_heads, scale, return_lse):
    """attention_packed's implementation (the op's, and run_packed's in plain eager use)."""
    with _on_device(q.device):
        return _forward(q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                        return_lse, cu_seqlens=cu_seqlens, max_seqlen=max_seqlen)


@torch.library.custom_op(f"{NAMESPACE}::attention_padded", mutates_args=(), device_types="cuda")
def attention_padded(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     pos_key: torch.Tensor | None, pos_query: torch.Tensor | None,
                     slot_table: torch.Tensor | None, positions_id: int, key_mask: torch.Tensor,
                     num_heads: int, scale: float,
                     return_lse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask, num_heads,
                   scale, return_lse)


@attention_padded.register_fake
def _attention_padded_fake(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask,
                           num_heads, scale, return_lse):
    torch._check(q.dim() == 3 and k.shape == q.shape and v.shape == q.shape)
    torch._check(key_mask.shape == q.shape[:2])
    lse_shape = (num_heads, q.size(0), q.size(1)) if return_lse else (0,)
    return q.new_empty(q.shape), q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.custom_op(f"{NAMESPACE}::attention_packed", mutates_args=(), device_types="cuda")
def attention_packed(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                     pos_key: torch.Tensor | None, pos_query: torch.Tensor | None,
                     slot_table: torch.Tensor | None, positions_id: int, cu_seqlens: torch.Tensor,
                     max_seqlen: int, num_heads: int, scale: float,
                     return_lse: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return _packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens, max_seqlen,
                   num_heads, scale, return_lse)


@attention_packed.register_fake
def _attention_packed_fake(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens,
                           max_seqlen, num_heads, scale, return_lse):
    torch._check(q.dim() == 2 and k.shape == q.shape and v.shape == q.shape)
    torch._check(cu_seqlens.dim() == 1)
    lse_shape = (num_heads, q.size(0)) if return_lse else (0,)
    return q.new_empty(q.shape), q.new_empty(lse_shape, dtype=torch.float32)


def _no_backward(ctx, *grads):
    raise RuntimeError("dflash_torch: the fused attention has no backward yet (inference only); "
                       "run under torch.no_grad() or torch.inference_mode()")


attention_padded.register_autograd(_no_backward)
attention_packed.register_autograd(_no_backward)


if hasattr(torch._C, "_len_torch_dispatch_stack"):
    def no_dispatch_mode() -> bool:
        return torch._C._len_torch_dispatch_stack() == 0
else:
    def no_dispatch_mode() -> bool:
        return False


def _direct(q: torch.Tensor, *tensors: torch.Tensor | None) -> bool:
    """Whether a call may skip the dispatcher (about a third of the op's host time at small
    shapes): plain CUDA tensors in eager code, outside tracing, dispatch modes and autograd, where
    the op would only forward to _forward. Elsewhere the op runs, so tracers see it and its fake
    and autograd registrations apply."""
    return (type(q) is torch.Tensor and q.is_cuda and not torch.compiler.is_compiling()
            and no_dispatch_mode()
            and not (torch.is_grad_enabled()
                     and any(t is not None and t.requires_grad for t in (q,) + tensors)))


class LaunchCache:
    """Passed to run_padded / run_packed by calls that repeat one problem on other tensors (the
    layers of one encoder forward): the first call's checked arguments and workspace serve the
    next calls that fit them (_Launch.fits), which then only set addresses and launch. Holds its
    workspace until dropped: make one per forward."""

    __slots__ = ("launch",)

    def __init__(self):
        self.launch: _Launch | None = None


def _launch(cache: LaunchCache, q, k, v, pos_key, pos_query, slot_table, positions_id,
            num_heads, scale, return_lse, key_mask=None, cu_seqlens=None, max_seqlen=0):
    launch = cache.launch
    if launch is None or not launch.fits(q, k, v, pos_key, pos_query,
                                         (slot_table, key_mask, cu_seqlens),
                                         (positions_id, max_seqlen, num_heads, scale,
                                          return_lse)):
        with _on_device(q.device):
            launch = _Launch(q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads,
                             scale, return_lse, key_mask, cu_seqlens, max_seqlen)
        cache.launch = launch
    return launch(q, k, v, pos_key, pos_query, keep_workspace=True)


def run_padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask, num_heads, scale,
               return_lse, reuse: LaunchCache | None = None):
    """attention_padded's result: the op, or in plain eager CUDA use its implementation directly
    (with `reuse`, through the launch it holds where the problem fits)."""
    if not _direct(q, k, v, pos_key, pos_query):
        return attention_padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask,
                                num_heads, scale, return_lse)
    if reuse is None:
        return _padded(q, k, v, pos_key, pos_query, slot_table, positions_id, key_mask, num_heads,
                       scale, return_lse)
    return _launch(reuse, q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                   return_lse, key_mask=key_mask)


def run_packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens, max_seqlen,
               num_heads, scale, return_lse, reuse: LaunchCache | None = None):
    """attention_packed's result: the op, or in plain eager CUDA use its implementation directly
    (with `reuse`, through the launch it holds where the problem fits)."""
    if not _direct(q, k, v, pos_key, pos_query):
        return attention_packed(q, k, v, pos_key, pos_query, slot_table, positions_id,
                                cu_seqlens, max_seqlen, num_heads, scale, return_lse)
    if reuse is None:
        return _packed(q, k, v, pos_key, pos_query, slot_table, positions_id, cu_seqlens,
                       max_seqlen, num_heads, scale, return_lse)
    return _launch(reuse, q, k, v, pos_key, pos_query, slot_table, positions_id, num_heads, scale,
                   return_lse, cu_seqlens=cu_seqlens, max_seqlen=max_seqlen)
