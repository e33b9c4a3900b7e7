"""ctypes binding of libdflash_attention (kernels/capi/dflash_attention.h).

The library is plain C over the CUDA toolkit: loading it needs no PyTorch C++ ABI, so one build
serves every PyTorch version. It is found at $DFLASH_TORCH_LIBRARY, else beside this module (where
the wheel installs it).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path

ABI_VERSION = 1
LIBRARY_NAME = "libdflash_attention.so"

OK = 0
INVALID_ARGUMENT = 1
UNSUPPORTED = 2
WORKSPACE_TOO_SMALL = 3
CUDA_ERROR = 4

FLOAT16 = 0
BFLOAT16 = 1
FLOAT32 = 2


class KernelError(RuntimeError):
    """A call into libdflash_attention failed; `status` is its dflash_attention_status."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Config(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("windows", ctypes.c_int32),
        ("mma", ctypes.c_int32),
        ("min_blocks_per_sm", ctypes.c_int32),
        ("key_groups", ctypes.c_int32),
        ("block_m", ctypes.c_int32),
        ("block_n", ctypes.c_int32),
        ("warps", ctypes.c_int32),
    ]


class Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("device", ctypes.c_int32),
        ("dtype", ctypes.c_int32),
        ("allow_tf32", ctypes.c_int32),
        ("num_heads", ctypes.c_int32),
        ("head_dim", ctypes.c_int32),
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("q_row_stride", ctypes.c_int64),
        ("k_row_stride", ctypes.c_int64),
        ("v_row_stride", ctypes.c_int64),
        ("out", ctypes.c_void_p),
        ("out_row_stride", ctypes.c_int64),
        ("pos_key", ctypes.c_void_p),
        ("pos_query", ctypes.c_void_p),
        ("cu_seqlens", ctypes.c_void_p),
        ("num_sequences", ctypes.c_int32),
        ("max_seqlen", ctypes.c_int32),
        ("total_tokens", ctypes.c_int32),
        ("padded_length", ctypes.c_int32),
        ("key_padding_mask", ctypes.c_void_p),
        ("scale", ctypes.c_float),
        ("positions_id", ctypes.c_int32),
        ("slot_table", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("config", ctypes.POINTER(Config)),
    ]


def make_config(windows: int, mma: int, min_blocks_per_sm: int, key_groups: int = 0,
                block_m: int = 64, block_n: int = 64, warps: int = 4) -> Config:
    return Config(ctypes.sizeof(Config), windows, mma, min_blocks_per_sm, key_groups, block_m,
                  block_n, warps)


class Library:
    """The loaded library with typed entry points; every failure raises KernelError."""

    def __init__(self, path: Path):
        self.path = path
        lib = ctypes.CDLL(str(path))
        lib.dflash_attention_abi_version.restype = ctypes.c_uint32
        lib.dflash_attention_last_error.restype = ctypes.c_char_p
        lib.dflash_attention_cuda_version.restype = ctypes.c_int32
        lib.dflash_attention_wgmma_compiled.restype = ctypes.c_int32
        lib.dflash_attention_register_positions.argtypes = [
            ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)]
        lib.dflash_attention_workspace_bytes.argtypes = [
            ctypes.POINTER(Args), ctypes.POINTER(ctypes.c_size_t)]
        lib.dflash_attention_heuristic_config.argtypes = [
            ctypes.POINTER(Args), ctypes.POINTER(Config)]
        lib.dflash_attention_check_config.argtypes = [ctypes.POINTER(Args), ctypes.POINTER(Config)]
        lib.dflash_attention_forward.argtypes = [
            ctypes.POINTER(Args), ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        for name in ("register_positions", "workspace_bytes", "heuristic_config",
                     "check_config", "forward"):
            getattr(lib, "dflash_attention_" + name).restype = ctypes.c_int
        version = lib.dflash_attention_abi_version()
        if version != ABI_VERSION:
            raise OSError(f"{path}: ABI version {version}, this package speaks {ABI_VERSION}")
        self._lib = lib
        self.cuda_version = int(lib.dflash_attention_cuda_version())
        self.wgmma_compiled = bool(lib.dflash_attention_wgmma_compiled())
        self._positions: dict[tuple, int] = {}
        self._lock = threading.Lock()

    def _check(self, status: int, what: str) -> None:
        if status != OK:
            message = self._lib.dflash_attention_last_error().decode(errors="replace")
            raise KernelError(status, f"{what}: {message}")

    def register_positions(self, table: tuple[int, ...], band: int, span: int) -> int:
        key = (table, band, span)
        with self._lock:
            found = self._positions.get(key)
            if found is not None:
                return found
            array = (ctypes.c_int32 * len(table))(*table)
            native_id = ctypes.c_int32()
            self._check(self._lib.dflash_attention_register_positions(
                array, band, span, ctypes.byref(native_id)), "register_positions")
            self._positions[key] = native_id.value
            return native_id.value

    def workspace_bytes(self, args: Args) -> int:
        size = ctypes.c_size_t()
        self._check(self._lib.dflash_attention_workspace_bytes(ctypes.byref(args),
                                                               ctypes.byref(size)),
                    "workspace_bytes")
        return size.value

    def heuristic_config(self, args: Args) -> Config:
        config = make_config(0, 0, 0)
        self._check(self._lib.dflash_attention_heuristic_config(ctypes.byref(args),
                                                                ctypes.byref(config)),
                    "heuristic_config")
        return config

    def config_applies(self, args: Args, config: Config) -> bool:
        status = self._lib.dflash_attention_check_config(ctypes.byref(args), ctypes.byref(config))
        if status == UNSUPPORTED:
            return False
        self._check(status, "check_config")
        return True

    def forward(self, args: Args, workspace: int, workspace_bytes: int, stream: int) -> None:
        self._check(self._lib.dflash_attention_forward(ctypes.byref(args), workspace,
                                                       workspace_bytes, stream),
                    "disentangled attention forward")


_library: Library | None = None
_load_error: str | None = None
_load_lock = threading.Lock()


def library_path() -> Path:
    configured = os.environ.get("DFLASH_TORCH_LIBRARY")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent / LIBRARY_NAME


def load() -> Library | None:
    """The library, loaded once per process; None when it cannot be (load_error() says why)."""
    global _library, _load_error
    with _load_lock:
        if _library is None and _load_error is None:
            path = library_path()
            try:
                if not path.is_file():
                    raise OSError(f"{path} does not exist (build the package with pip, or set "
                                  "DFLASH_TORCH_LIBRARY)")
                _library = Library(path)
            except OSError as error:
                _load_error = str(error)
        return _library


def load_error() -> str | None:
    load()
    return _load_error


def require() -> Library:
    library = load()
    if library is None:
        raise RuntimeError(f"dflash_torch: the attention library is unavailable: {_load_error}")
    return library
