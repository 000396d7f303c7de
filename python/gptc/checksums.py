"""The CRC-32 of each tensor of a safetensors file gptc writes, in its metadata entry
"gptc.crc32" as JSON {name: 8 lowercase hex digits} — the same entry and digits as the
runtime's writer and reader (gptc/safetensors.hpp), so that a flipped byte in weights or a
checkpoint is refused on load instead of loading silently."""
import json
import zlib

import numpy as np
import torch

KEY = "gptc.crc32"


def crc32_hex(a) -> str:
    """The CRC-32 of a tensor's or array's bytes (row-major), as 8 hex digits."""
    if isinstance(a, torch.Tensor):
        a = a.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()  # 0-d too
    return f"{zlib.crc32(np.ascontiguousarray(a).view(np.uint8).reshape(-1)) & 0xffffffff:08x}"


def metadata(tensors: dict) -> dict:
    """{KEY: the JSON of every tensor's CRC-32}, for safetensors' metadata."""
    return {KEY: json.dumps({n: crc32_hex(t) for n, t in tensors.items()}, sort_keys=True)}
