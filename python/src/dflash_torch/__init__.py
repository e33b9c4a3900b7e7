"""dflash_torch: DisentangledFlash Serve's fused DeBERTa attention kernel as PyTorch custom ops.

  torch.ops.dflash.attention_padded / attention_packed   the ops (dflash_torch.ops)
  dflash_torch.optimize_deberta(model)                   swap a transformers DeBERTa-v2/v3 model's
                                                          attention for the kernel (inference)
  dflash_torch.packed_layout / pack / unpack             padded <-> packed (cu_seqlens) helpers
  dflash_torch.use_packed_layout(layout)                 a packed model's layout from the host mask
  dflash_torch.reset_graphs(model)                       drop the CUDA graphs of cuda_graphs=True
"""

import importlib

from . import ops
from .ops import register_slot_table
from .packing import PackedLayout, pack, pack_batch, packed_layout, unpack
from .relative_positions import PositionSettings, SlotTable, build_slot_table

__version__ = "0.1.0"

__all__ = ["ops", "register_slot_table", "PackedLayout", "pack", "pack_batch", "packed_layout",
           "unpack", "PositionSettings", "SlotTable", "build_slot_table", "optimize_deberta",
           "restore_deberta", "use_packed_layout", "FallbackError", "kernel_available",
           "reset_graphs"]


def kernel_available() -> bool:
    """True when the attention library loads (a GPU is still needed to run it)."""
    from . import _native
    return _native.load() is not None


def __getattr__(name):
    # transformers is needed only for the DeBERTa integration: imported on first use.
    if name in ("optimize_deberta", "restore_deberta", "use_packed_layout", "FallbackError",
                "reset_fallback_warnings", "reset_graphs"):
        return getattr(importlib.import_module(f"{__name__}.deberta"), name)
    if name == "layers":  # The Hub kernels loader reads kernel.layers.
        return importlib.import_module(f"{__name__}.layers")
    raise AttributeError(f"module 'dflash_torch' has no attribute {name!r}")
