"""Writes the seed corpora of the runtime's fuzz targets (test/fuzz/corpus/; runtime_fuzz.cpp).
Run once to make them; they are kept in the repository. Each seed is a small valid input, so
that the fuzzer starts from the forms the runtime takes: safetensors files (with and without
gptc's CRC-32s, several dtypes, a scalar, metadata) and manifests of the fixture artifact
(test/unit/fixture_artifact.h) with each optional key."""
import json
import os
import struct
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))


def safetensors(tensors, metadata=None, sums=True):
    """tensors: [(name, dtype, shape, raw bytes)]; the safetensors layout, header padded to 8."""
    header, data = {}, b""
    crcs = {}
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        crcs[name] = "%08x" % zlib.crc32(raw)
        data += raw
    meta = dict(metadata or {})
    if sums:
        meta["gptc.crc32"] = json.dumps(crcs, separators=(",", ":"))
    if meta:
        header["__metadata__"] = meta
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def floats(*v):
    return struct.pack("<%df" % len(v), *v)


SAFETENSORS = {
    "fixture": safetensors([("w", "F32", [2, 3], floats(1, 2, 3, 4, 5, 6))]),
    "no-sums": safetensors([("w", "F32", [2, 3], floats(1, 2, 3, 4, 5, 6))], sums=False),
    "dtypes": safetensors([("a", "F64", [2], struct.pack("<2d", 0.5, -2.0)),
                           ("b", "I64", [1, 2], struct.pack("<2q", 7, -1)),
                           ("c", "BF16", [3], struct.pack("<3H", 0x3F80, 0x4000, 0x8000)),
                           ("d", "BOOL", [4], bytes([0, 1, 1, 0])),
                           ("e", "F32", [], floats(3.25))],
                          metadata={"step": "12", "seed": "7", "format": "pt"}),
    "empty": safetensors([]),
}

def fixture_manifest():
    """The runtime tests' manifest, kManifest in test/unit/fixture_artifact.h."""
    with open(os.path.join(HERE, "..", "unit", "fixture_artifact.h")) as f:
        text = f.read()
    start = text.index('kManifest = R"(') + len('kManifest = R"(')
    return json.loads(text[start:text.index(')"', start)])


FIXTURE = fixture_manifest()
MANIFESTS = {
    "fixture": FIXTURE,
    "portable-cpu": dict(FIXTURE, target="cpu", numerics="portable", sanitize=False),
    "cuda-emulated": dict(FIXTURE, target="cuda-emulated", numerics="portable"),
    "state-arg": dict(FIXTURE, args=FIXTURE["args"] + [
        {"name": "exp_avg.w", "kind": "state", "dtype": "f32", "shape": [2, 3]}]),
}

for name, blob in SAFETENSORS.items():
    with open(os.path.join(HERE, "corpus", "safetensors", name + ".safetensors"), "wb") as f:
        f.write(blob)
for name, m in MANIFESTS.items():
    with open(os.path.join(HERE, "corpus", "manifest", name + ".json"), "w") as f:
        json.dump(m, f, indent=1)
