"""Tuning profiles (config/profiles/*.yaml, written by dflash-tune) for the PyTorch ops.

The same files, family keys and selection rules as the engine (engine/tuning/tuning_profile.h,
attention_family.h): a profile matches a device by GPU name, SM and the CUDA version the library
was built with; its entry for a problem's family names the kernel variant. Where no profile or
entry applies, the kernel's built-in heuristic runs.

Where profiles are read from: $DFLASH_PROFILES_DIR; else the profiles installed in the package;
else the source checkout's config/profiles. $DFLASH_PROFILE=none disables profiles; a path names
one file (used when its SM matches the device).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

MIN_LENGTH_BUCKET = 64
PROFILE_FORMAT = 1

WINDOWS = {"tables": 0, "computed": 1}
MMA = {"sync": 0, "wgmma": 1}


def length_bucket(length: int) -> int:
    bucket = MIN_LENGTH_BUCKET
    while bucket < length and bucket <= (1 << 29):
        bucket *= 2
    return bucket


def family_key(dtype: str, head_dim: int, padded: bool, c2p: bool, p2c: bool,
               longest: int) -> str:
    """"bf16/d64/packed/c2p+p2c/L1024", as attention_family.h spells it."""
    bias = "c2p+p2c" if c2p and p2c else "c2p" if c2p else "p2c" if p2c else "none"
    layout = "padded" if padded else "packed"
    return f"{dtype}/d{head_dim}/{layout}/{bias}/L{length_bucket(longest)}"


@dataclass(frozen=True)
class EntryConfig:
    windows: int
    mma: int
    min_blocks_per_sm: int
    key_groups: int = 0
    block_m: int = 64
    block_n: int = 64
    warps: int = 4


@dataclass
class Profile:
    name: str
    gpu: str
    sm: tuple[int, int]
    cuda: tuple[int, int]
    source: str
    entries: dict[str, EntryConfig] = field(default_factory=dict)


def _major_minor(text, where: str) -> tuple[int, int]:
    parts = str(text).split(".")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{where}: expected \"major.minor\", got {text!r}")
    return int(parts[0]), int(parts[1])


def parse_profile(text: str, source: str) -> Profile:
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or data.get("format") != PROFILE_FORMAT:
        raise ValueError(f"{source}: not a format-{PROFILE_FORMAT} tuning profile")
    profile = Profile(name=str(data["name"]), gpu=str(data["gpu"]),
                      sm=_major_minor(data["sm"], f"{source}: sm"),
                      cuda=_major_minor(data["cuda"], f"{source}: cuda"), source=source)
    for index, entry in enumerate(data.get("entries") or []):
        where = f"{source}: entries[{index}]"
        config = entry["config"]
        unknown = set(config) - {"windows", "min_blocks_per_sm", "block_m", "block_n", "warps",
                                 "key_groups", "mma"}
        if unknown:
            raise ValueError(f"{where}.config: unknown keys {sorted(unknown)}")
        if config["windows"] not in WINDOWS or config.get("mma", "sync") not in MMA:
            raise ValueError(f"{where}.config: bad windows or mma")
        profile.entries[str(entry["family"])] = EntryConfig(
            windows=WINDOWS[config["windows"]], mma=MMA[config.get("mma", "sync")],
            min_blocks_per_sm=int(config["min_blocks_per_sm"]),
            key_groups=int(config.get("key_groups", 0)), block_m=int(config.get("block_m", 64)),
            block_n=int(config.get("block_n", 64)), warps=int(config.get("warps", 4)))
    return profile


def profiles_directory() -> Path:
    configured = os.environ.get("DFLASH_PROFILES_DIR")
    if configured:
        return Path(configured)
    installed = Path(__file__).resolve().parent / "profiles"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[3] / "config" / "profiles"


def load_profiles(directory: Path) -> list[Profile]:
    """Every *.yaml of `directory` in file-name order; a missing directory holds none."""
    if not directory.is_dir():
        return []
    return [parse_profile(path.read_text(), str(path)) for path in sorted(directory.glob("*.yaml"))]


def match_profile(profiles: list[Profile], gpu: str, sm: tuple[int, int],
                  cuda: tuple[int, int]) -> Profile | None:
    """MatchTuningProfile's rules: the same GPU name, SM and CUDA major.minor; else the same name
    and SM with the same CUDA major (the newest minor at or below the device's, else the oldest
    above); else none. Ties go to the earlier file."""
    same_device = [p for p in profiles if p.gpu == gpu and p.sm == sm]
    for profile in same_device:
        if profile.cuda == cuda:
            return profile
    same_major = [p for p in same_device if p.cuda[0] == cuda[0]]
    below = [p for p in same_major if p.cuda[1] <= cuda[1]]
    if below:
        best = max(p.cuda[1] for p in below)
        return next(p for p in below if p.cuda[1] == best)
    if same_major:
        best = min(p.cuda[1] for p in same_major)
        return next(p for p in same_major if p.cuda[1] == best)
    return None


def select_profile(gpu: str, sm: tuple[int, int], cuda: tuple[int, int]) -> Profile | None:
    """The profile for a device under $DFLASH_PROFILE (auto, none, or a file path)."""
    choice = os.environ.get("DFLASH_PROFILE", "auto")
    if choice == "none":
        return None
    if choice != "auto":
        profile = parse_profile(Path(choice).read_text(), choice)
        return profile if profile.sm == sm else None
    return match_profile(load_profiles(profiles_directory()), gpu, sm, cuda)
