"""CUDA graphs of the patched encoder's forward, recorded per batch shape and replayed
(optimize_deberta(..., cuda_graphs=True)), in the padded and the packed layout.

At classification and reranking lengths an eager forward is bound by the host: each layer issues
about ten kernels at about 20 us of Python and dispatch each, and the GPU finishes them sooner. A
graph of the whole encoder issues them with one launch.

Recording: the first forward of a key (batch, length rounded up to `length_multiple`, dtype,
hidden size, device, mask dtype, whether every layer's states are returned, TF32 for float32)
runs eagerly on the caller's stream and returns that result (it is also the warm-up: kernels
loaded, the projection caches built), then records the encoder on static input buffers into a
graph on a side stream of its own. No eager work runs on that stream, so cuBLAS allocates its
workspace for it inside the first recording, from the graphs' own pool: freeing it (PyTorch does
when a graph is destroyed) cannot hand it to a tensor outside the graphs while a graph holds its
address. Later forwards of the key copy their inputs into the static buffers, replay the graph
on the caller's current stream and copy the outputs out, so the caller owns them and no later
replay overwrites them. Rounding the length up (masked keys, zero states) lets varied lengths
share a few graphs; outputs are cut back to the caller's length. Real positions compute what the
eager forward computes, up to the rounding of GEMMs of another shape.

Packed layout: the key also holds the batch's token count T, rounded up to T' by less than
max(T / 8, length_multiple) (tokens_key), and its longest sequence rounded up to a multiple of
64, the kernel's query tile (the launch's bound: its tiles per sequence stay those of the real
longest), and lengths round up to a multiple of 64 at least. The graph computes the packing
itself from the static mask at that count (packing.fixed_shape_layout: the rows past T form
extra sequences that nothing reads), so it runs the layers on T' rows instead of B x L'. Its
static output is the packed states; unpacking them is the copy out. The layout built before the
graph (from the mask, or handed in by use_packed_layout) gives T and the longest sequence and
unpacks the outputs.

Memory: an encoder's graphs record into one pool, and their inputs and outputs are views of
static buffers sized for the largest key seen (grown by doubling), so memory stays near one
forward's worth however many graphs exist (at most `max_graphs`: recording one more drops them
all, as destroying one graph may free the cuBLAS workspace all share). Replays therefore take
turns: a replay on another stream than the last one waits for it, calls from several threads are
serialised by a lock, and memory is let go only after the last replay has finished.

Validity: a graph reads the parameters and the projection caches at fixed addresses. Every graphed
forward stamps the encoder's modules (each child's identity, training flag and hooks) and their
parameters and buffers (version counter, address; address only for inference tensors, which have
no version counter); a change (load_state_dict, an in-place update, .to(), a reassigned
parameter or module) drops the graphs, which are recorded again. Hooks on any module of the
encoder, global module hooks or a module in training mode run the eager forward, as do grad
mode (graphs run under torch.no_grad() or torch.inference_mode() only), tracing and
torch.compile, dispatch modes, a capture the caller runs, autocast and tensors off the GPU.
"""

from __future__ import annotations

import itertools
import math
import threading
import warnings
from dataclasses import dataclass
from typing import Callable

import torch
from torch.nn.modules import module as _module

from .ops import allow_tf32, no_dispatch_mode
from .packing import PackedLayout, fixed_shape_layout, unpack_layers
from .projections import CACHE_ATTRIBUTES

_QUERY_BLOCK = 64  # rows of the attention kernel's query tiles

# run_layers(encoder, hidden_states, attention_mask, keep_all, packing) -> the layers' output
# states, every layer's (keep_all) or the last one's: padded [B, L, H] each, or with a
# PackedLayout `packing` its tokens' [T, H] each (deberta.run_layers).
RunLayers = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor, bool, PackedLayout | None],
                     list]


def _round_up(value: int, multiple: int) -> int:
    return -(-value // multiple) * multiple


@dataclass
class _Recorded:
    graph: torch.cuda.CUDAGraph
    hidden: torch.Tensor  # static input [B, L', H] (packed: [B, L' + 1, H])
    mask: torch.Tensor  # static input [B, L'] (packed: [B, L' + 1])
    states: torch.Tensor  # static output [layers or 1, B, L', H] (packed: [layers or 1, T', H])
    keep: tuple  # what the graph reads that nothing else may free: its buffers, cache entries


class _StaticBuffers:
    """Flat buffers per (role, dtype, device), grown by doubling; a graph's static tensors are
    views of their first elements. A grown buffer replaces the smaller one for later recordings;
    graphs recorded on the smaller one keep it alive."""

    def __init__(self):
        self._flat: dict[tuple, torch.Tensor] = {}

    def view(self, role: str, shape: tuple, dtype: torch.dtype, device: torch.device):
        numel = math.prod(shape)
        key = (role, dtype, device)
        flat = self._flat.get(key)
        if flat is None or flat.numel() < numel:
            capacity = max(numel, 2 * flat.numel() if flat is not None else 0)
            with torch.inference_mode(False):
                flat = torch.empty(capacity, dtype=dtype, device=device)
            self._flat[key] = flat
        return flat[:numel].view(shape), flat

    def clear(self):
        self._flat.clear()


class EncoderGraphs:
    """The recorded graphs of one patched encoder (module docstring)."""

    def __init__(self, run_layers: RunLayers, length_multiple: int = 16, max_graphs: int = 64):
        if length_multiple < 1:
            raise ValueError(f"length_multiple must be at least 1, got {length_multiple}")
        if max_graphs < 1:
            raise ValueError(f"max_graphs must be at least 1, got {max_graphs}")
        self.length_multiple = length_multiple
        self.max_graphs = max_graphs
        self._run_layers = run_layers
        self._lock = threading.Lock()
        self._graphs: dict[tuple, _Recorded] = {}
        self._buffers = _StaticBuffers()
        self._modules: list[torch.nn.Module] | None = None
        self._stamp: list | None = None
        self._pools: dict[int, tuple] = {}
        self._side_streams: dict[int, torch.cuda.Stream] = {}
        self._last_replay: tuple[torch.cuda.Stream, torch.cuda.Event] | None = None
        self.disabled: str | None = None  # why recording failed; the eager forward runs then
        self.recorded = 0  # graphs recorded since creation (tests, benchmarks)

    def __len__(self) -> int:
        return len(self._graphs)

    def __deepcopy__(self, memo) -> EncoderGraphs:
        # A copied model records its own graphs (they would read the original's parameters).
        return EncoderGraphs(self._run_layers, self.length_multiple, self.max_graphs)

    def __getstate__(self):
        return {"length_multiple": self.length_multiple, "max_graphs": self.max_graphs,
                "run_layers": self._run_layers}

    def __setstate__(self, state):
        # "encode": the key of the first version (deberta._encode, which still serves padded
        # encoders, the only ones that version graphed).
        run_layers = state["run_layers"] if "run_layers" in state else state["encode"]
        self.__init__(run_layers, state["length_multiple"], state["max_graphs"])

    def clear(self) -> None:
        """Drops every graph and static buffer (their memory returns to PyTorch's allocator once
        the last replay has finished) and forgets a failed recording."""
        with self._lock:
            self._clear()
            self.disabled = None

    def _clear(self) -> None:
        self._wait_for_last_replay()
        self._graphs.clear()
        self._buffers.clear()
        self._pools.clear()
        self._modules = None
        self._stamp = None

    def _wait_for_last_replay(self) -> None:
        # Memory freed now may be handed out at once on the stream that allocated it; the last
        # replay may run on another. Rare (the encoder changed, or a graph is evicted): a host
        # wait is simpler than recording every stream on every buffer.
        if self._last_replay is not None:
            self._last_replay[1].synchronize()
            self._last_replay = None

    @staticmethod
    def applies(hidden_states: torch.Tensor, attention_mask: torch.Tensor) -> bool:
        """Whether a forward on these inputs may replay (the rest of the module docstring's
        conditions is checked by forward)."""
        return (type(hidden_states) is torch.Tensor and hidden_states.is_cuda
                and hidden_states.dim() == 3 and attention_mask.device == hidden_states.device
                and not torch.is_grad_enabled()
                and not torch.compiler.is_compiling() and no_dispatch_mode()
                and not torch.cuda.is_current_stream_capturing()
                and not torch.is_autocast_enabled(hidden_states.device.type)
                and not (_module._global_forward_hooks or _module._global_forward_pre_hooks))

    def _current_stamp(self) -> list | None:
        values = []
        append = values.append
        for module in self._modules:
            state = module.__dict__
            if (state["training"] or state["_forward_hooks"] or state["_forward_pre_hooks"]
                    or "forward" in state):
                return None
            tensors = state["_parameters"].values()
            if state["_buffers"]:  # few modules have any: no chain for the rest
                tensors = itertools.chain(tensors, state["_buffers"].values())
            for tensor in tensors:
                if tensor is not None:
                    try:
                        append(tensor._version)
                    except RuntimeError:  # an inference tensor: no version counter (and no
                        append(None)  # in-place change outside inference_mode)
                    append(tensor.data_ptr())
            values.extend(map(id, state["_modules"].values()))
        return values

    def tokens_key(self, tokens: int) -> int:
        """The token count a packed batch of `tokens` tokens is recorded at: rounded up to a
        step of 1/8 of its power of two, at least `length_multiple` (fewer than
        max(tokens / 8, length_multiple) rows more)."""
        step = max(self.length_multiple, 1 << max(tokens.bit_length() - 4, 0))
        return _round_up(tokens, step)

    def extra_sequences(self, tokens: int, longest: int) -> int:
        """How many sequences of at most `longest` rows hold the rows a graph recorded at
        `tokens` (a tokens_key) has past a batch's own count: fewer than
        tokens // 8 + length_multiple, the rounding step's bound."""
        return -(-(tokens // 8 + self.length_multiple) // longest)

    def forward(self, encoder: torch.nn.Module, hidden_states: torch.Tensor,
                attention_mask: torch.Tensor, keep_all: bool,
                packing: PackedLayout | None = None) -> list | None:
        """The encoder's padded output states (deberta._encode's result) by a replayed graph (or,
        where the key is new, by the eager forward that precedes its recording), or None where
        the eager forward must run. `packing`: the batch's layout, for the packed layout."""
        with self._lock:
            if self.disabled is not None:
                return None
            if self._modules is None:
                self._modules = list(encoder.modules())
            stamp = self._current_stamp()
            if stamp is not None and stamp != self._stamp:
                self._clear()  # the encoder changed: its graphs may read stale or freed memory
                self._modules = list(encoder.modules())
                stamp = self._stamp = self._current_stamp()
            if stamp is None:
                return None
            batch, length = attention_mask.shape
            if batch == 0 or (packing is not None and packing.total_tokens == 0):
                return None
            # Packed graphs: lengths are only the static inputs' width, rounded coarsely (fewer
            # keys); the kernel's bound is the longest sequence in whole 64-row query tiles.
            multiple = self.length_multiple if packing is None else max(self.length_multiple,
                                                                         _QUERY_BLOCK)
            padded = _round_up(length, multiple)
            tokens = longest = None
            if packing is not None:
                tokens = self.tokens_key(packing.total_tokens)
                longest = _round_up(max(packing.max_seqlen, 1), _QUERY_BLOCK)
            device = hidden_states.device
            dtype = hidden_states.dtype
            key = (batch, padded, tokens, longest, hidden_states.shape[-1], dtype,
                   attention_mask.dtype, device, keep_all, dtype == torch.float32 and allow_tf32())
            with torch.cuda.device(device):
                stream = torch.cuda.current_stream()
                if self._last_replay is not None and self._last_replay[0] != stream:
                    stream.wait_event(self._last_replay[1])
                recorded = self._graphs.get(key)
                if recorded is None:
                    states = self._run_layers(encoder, hidden_states, attention_mask, keep_all,
                                              packing)
                    self._record(encoder, key)
                    return states if packing is None else unpack_layers(states, packing)
                self._fill(recorded, hidden_states, attention_mask, length)
                recorded.graph.replay()
                if packing is None:
                    states = self._copy_out(recorded.states, length)
                else:
                    # Unpacking the static output is its copy out.
                    states = unpack_layers(recorded.states[:, :packing.total_tokens], packing)
                event = (self._last_replay[1] if self._last_replay is not None
                         else torch.cuda.Event())
                event.record(stream)
                self._last_replay = (stream, event)
            return states

    @staticmethod
    def _copy_out(states: torch.Tensor, length: int) -> list:
        # The last layer's states get their own tensor, so keeping only them (last_hidden_state)
        # does not keep every layer's; the others are views of one copy.
        if length != states.shape[2]:
            states = states[:, :, :length]
        last = states[-1].clone(memory_format=torch.contiguous_format)
        if states.shape[0] == 1:
            return [last]
        return list(states[:-1].clone(memory_format=torch.contiguous_format).unbind(0)) + [last]

    @staticmethod
    def _fill(recorded: _Recorded, hidden_states, attention_mask, length: int) -> None:
        # The padding past `length` is rewritten each time: other keys share the buffers.
        recorded.hidden[:, :length].copy_(hidden_states)
        recorded.mask[:, :length].copy_(attention_mask)
        if length < recorded.mask.shape[1]:
            recorded.hidden[:, length:].zero_()
            recorded.mask[:, length:].zero_()

    def _record(self, encoder, key) -> None:
        # Recording runs nothing, so the static inputs need no contents yet: each replay fills
        # them.
        batch, padded, tokens, longest, width, dtype, mask_dtype, device, keep_all, _ = key
        layers = len(encoder.layer) if keep_all else 1
        # Packed: one more position per row, always padding, where the extra rows of
        # fixed_shape_layout gather from and scatter to.
        length = padded if tokens is None else padded + 1
        hidden, hidden_flat = self._buffers.view("hidden", (batch, length, width), dtype, device)
        mask, mask_flat = self._buffers.view("mask", (batch, length), mask_dtype, device)
        rows = (batch, padded) if tokens is None else (tokens,)
        states, states_flat = self._buffers.view("states", (layers, *rows, width), dtype, device)
        recorded = _Recorded(torch.cuda.CUDAGraph(), hidden, mask, states, ())
        index = device.index if device.index is not None else torch.cuda.current_device()
        if index not in self._pools:
            self._pools[index] = torch.cuda.graph_pool_handle()
        side = self._side_streams.get(index)
        if side is None:
            side = self._side_streams[index] = torch.cuda.Stream()
        caller = torch.cuda.current_stream()
        side.wait_stream(caller)
        try:
            with torch.cuda.stream(side), torch.no_grad():
                recorded.graph.capture_begin(pool=self._pools[index],
                                             capture_error_mode="thread_local")
                try:
                    packing = None
                    if tokens is not None:
                        packing = fixed_shape_layout(mask, tokens, longest,
                                                     self.extra_sequences(tokens, longest))
                    torch.stack(self._run_layers(encoder, hidden, mask, keep_all, packing),
                                out=states)
                finally:
                    recorded.graph.capture_end()
        except RuntimeError as error:
            # Something in the encoder cannot be recorded (a host synchronisation, an op
            # unsupported in capture): it runs eagerly until reset_graphs().
            caller.wait_stream(side)
            self._clear()
            self.disabled = f"recording a CUDA graph failed: {error}"
            warnings.warn(f"dflash_torch: cuda_graphs off for this encoder until reset_graphs(), "
                          f"the eager forward runs: {self.disabled}", RuntimeWarning,
                          stacklevel=5)
            return
        caller.wait_stream(side)
        caches = tuple(module.__dict__[name] for module in self._modules
                       for name in CACHE_ATTRIBUTES if name in module.__dict__)
        recorded.keep = (hidden_flat, mask_flat, states_flat, caches)
        self._graphs[key] = recorded
        self.recorded += 1
        if len(self._graphs) > self.max_graphs:
            # Destroying a graph may release its stream's cuBLAS workspace, which every graph
            # recorded on that stream shares: all go (recording costs an eager forward and its
            # capture; with rounded lengths max_graphs is seldom reached).
            stamp, modules = self._stamp, self._modules
            self._clear()
            self._stamp, self._modules = stamp, modules
