"""gguf_sweep.py — malformed GGUF files against deltafin (Python standard library only).

usage: gguf_sweep.py DELTAFIN_BIN WORKDIR [--quick]
From a small valid model (gen-random qwen3moe, 2 layers, 4 experts, byte vocabulary):
  - the file cut at every structural offset (each field of the header, of every KV and of every
    tensor info, the start of every tensor's data) and one byte after it: `info` must refuse it
    naming the file and saying "truncated";
  - one bit flipped (0x01 and 0x80) at every structural offset: `info` and, when the file still
    parses, `run` must either work or refuse naming the file — never crash or hang;
  - crafted files: huge counts, lengths and dims, overflowing shapes, offsets past the end or
    misaligned, duplicate keys and tensor names, unknown KV and tensor types, bad alignment,
    names that are too long / not UTF-8 / empty, wrong versions and magic, arrays of arrays;
    each with the words its error message must contain;
  - NaN and Inf weights: `run` must stop naming the tensor, never print tokens.
Every case goes through tests/lib/sweep.py (crash / hang / unclear / lost); exit 1 unless all ok.
"""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf_tool as G  # noqa: E402
from sweep import Sweep  # noqa: E402

BIN, WORK = sys.argv[1], sys.argv[2]
DEV = os.environ.get("DELTAFIN_DEV_BIN") or os.path.abspath("build/deltafin-dev")  # gen-random
QUICK = "--quick" in sys.argv
sw = Sweep("malformed GGUF")
base = os.path.join(WORK, "base.gguf")
rc, out, err = sw.run([DEV, "gen-random", "--arch", "qwen3moe", "--n-layer", "2", "--n-expert", "4", "--vocab", "bytes",
                       "--seed", "7", base])
if rc != 0:
    print("gguf_sweep: gen-random failed:", err)
    sys.exit(1)
data = open(base, "rb").read()
g = G.parse(data)
bad = os.path.join(WORK, "bad.gguf")


def put(d):
    open(bad, "wb").write(d)


def info():
    return sw.run([BIN, "info", bad], timeout=60)


def run():
    return sw.run([BIN, "run", "-m", bad, "-p", "hi", "-n", "2", "--temp", "0", "-t", "1"], timeout=60)


# ---- truncation at every structural offset ---------------------------------------------------
cuts = sorted(set(o for o, _ in g.marks if o < len(data)) | set(o + 1 for o, _ in g.marks if o + 1 < len(data)))
if QUICK:
    cuts = cuts[::7]
for at in cuts:
    put(data[:at])
    what = [w for o, w in g.marks if o <= at][-1]
    rc, out, err = info()
    sw.judge("cut at %d (%s)" % (at, what), rc, out, err, must=(r"bad\.gguf", r"truncated"))

# ---- one bit flipped at every structural offset ----------------------------------------------
spots = [(o, w) for o, w in g.marks if o < g.data_start]
if QUICK:
    spots = spots[::5]
for o, w in spots:
    for bit in (0x01, 0x80):
        d = bytearray(data)
        d[o] ^= bit
        put(bytes(d))
        rc, out, err = info()
        v = sw.judge("flip 0x%02x at %d (%s): info" % (bit, o, w), rc, out, err, must=(r"bad\.gguf",), may_pass=True)
        if v == "ok" and rc == 0:
            rc, out, err = run()
            sw.judge("flip 0x%02x at %d (%s): run" % (bit, o, w), rc, out, err, must=(r"bad\.gguf|tensor|layer|token|context",),
                     may_pass=True)


# ---- crafted files ---------------------------------------------------------------------------
def f32(n, v=0.5):
    return struct.pack("<%df" % n, *([v] * n))


KVS = [("general.architecture", G.STRING, G.kv_raw(G.STRING, "llama")), ("general.name", G.STRING, G.kv_raw(G.STRING, "x"))]
T1 = [("a.weight", 0, [8, 4], f32(32)), ("b.weight", 0, [8], f32(8))]


def header(nt, nkv, version=3, magic=b"GGUF"):
    return magic + struct.pack("<IQQ", version, nt, nkv)


def one_kv(key, t, raw):
    kb = key.encode()
    return struct.pack("<Q", len(kb)) + kb + struct.pack("<I", t) + raw


def tinfo(name, dims, ttype, off):
    nb = name if isinstance(name, bytes) else name.encode()
    return struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", x) for x in dims) + \
        struct.pack("<IQ", ttype, off)


def with_tensors(infos, payload, kvs=KVS, align=32):
    b = header(len(infos), len(kvs)) + b"".join(one_kv(*kv) for kv in kvs) + b"".join(infos)
    b += b"\0" * ((-len(b)) % align)
    return b + payload


good = G.write(KVS, T1)
crafted = [
    ("empty file", b"", r"truncated"),
    ("3 bytes", b"GGU", r"truncated"),
    ("bad magic", b"GGML" + good[4:], r"bad magic"),
    ("version 1", good[:4] + struct.pack("<I", 1) + good[8:], r"version 1 is not supported"),
    ("version 4", good[:4] + struct.pack("<I", 4) + good[8:], r"unsupported GGUF version 4"),
    ("byte-swapped version", good[:4] + struct.pack(">I", 3) + good[8:], r"byte-swapped"),
    ("tensor count 2^63", good[:8] + struct.pack("<Q", 1 << 63) + good[16:], r"tensor count"),
    ("KV count 2^40", good[:16] + struct.pack("<Q", 1 << 40) + good[24:], r"KV count"),
    ("key length 2^62", header(0, 1) + struct.pack("<Q", 1 << 62) + b"abc", r"(string length|truncated)"),
    ("string value length 2^63", header(0, 1) + one_kv("k", G.STRING, struct.pack("<Q", 1 << 63) + b"x"),
     r"string length"),
    ("array count 2^60 of u32", header(0, 1) + one_kv("k", G.ARRAY, struct.pack("<IQ", G.U32, 1 << 60)), r"array"),
    ("array count 2^60 of strings", header(0, 1) + one_kv("k", G.ARRAY, struct.pack("<IQ", G.STRING, 1 << 60)), r"array"),
    ("array of arrays", header(0, 1) + one_kv("k", G.ARRAY, struct.pack("<IQ", G.ARRAY, 1) + struct.pack("<IQ", G.U8, 0)),
     r"(nested|array of arrays|array)"),
    ("KV type 13", header(0, 1) + one_kv("k", 13, b"\0" * 8), r"(type 13|invalid|unknown)"),
    ("KV type 0xffffffff", header(0, 1) + one_kv("k", 0xFFFFFFFF, b"\0" * 8), r"(invalid|unknown|type)"),
    ("bool value 7", header(0, 1) + one_kv("k", G.BOOL, b"\x07"), r"KV 'k': bool value 7 \(must be 0 or 1\)"),
    ("bool array element 2", header(0, 1) + one_kv("k", G.ARRAY, struct.pack("<IQ", G.BOOL, 3) + b"\x00\x01\x02"),
     r"KV 'k': array element 2: bool value 2"),
    ("duplicate key", header(0, 2) + one_kv("k", G.U32, G.kv_raw(G.U32, 1)) + one_kv("k", G.U32, G.kv_raw(G.U32, 2)),
     r"duplicate key 'k'"),
    ("empty key", header(0, 1) + one_kv("", G.U32, G.kv_raw(G.U32, 1)), r"(empty|key)"),
    ("key not UTF-8", header(0, 1) + struct.pack("<Q", 2) + b"\xff\xfe" + struct.pack("<I", G.U32) + G.kv_raw(G.U32, 1),
     r"KV #0: key is not valid UTF-8"),
    ("alignment 0", G.write(KVS + [("general.alignment", G.U32, G.kv_raw(G.U32, 0))], T1), r"not a power of two"),
    ("alignment 3", G.write(KVS + [("general.alignment", G.U32, G.kv_raw(G.U32, 3))], T1), r"not a power of two"),
    ("alignment as a string", G.write(KVS + [("general.alignment", G.STRING, G.kv_raw(G.STRING, "32"))], T1),
     r"general.alignment' has type"),
    ("n_dims 5", with_tensors([tinfo("a", [1, 1, 1, 1, 1], 0, 0)], f32(1)), r"n_dims 5"),
    ("n_dims 2^31", with_tensors([struct.pack("<Q", 1) + b"a" + struct.pack("<I", 1 << 31)], b""), r"n_dims"),
    ("negative dimension", with_tensors([tinfo("a", [(1 << 64) - 4, 1], 0, 0)], f32(1)), r"negative dimension"),
    ("dims overflow int64", with_tensors([tinfo("a", [1 << 40, 1 << 40], 0, 0)], f32(1)), r"overflows"),
    ("unknown tensor type 99", with_tensors([tinfo("a", [8], 99, 0)], f32(8)), r"invalid tensor type 99"),
    ("removed tensor type 4", with_tensors([tinfo("a", [32], 4, 0)], b"\0" * 32), r"removed type"),
    ("ne[0] not a block multiple", with_tensors([tinfo("a", [40], 8, 0)], b"\0" * 64), r"not a multiple of the block size"),
    ("offset past the end", with_tensors([tinfo("a", [8], 0, 0), tinfo("b", [8], 0, 1 << 40)], f32(16)),
     r"tensor 'b'.*(expected|beyond)"),
    ("misaligned offset", with_tensors([tinfo("a", [8], 0, 0), tinfo("b", [8], 0, 33)], f32(24)), r"not a multiple of the alignment"),
    ("data past the end of the file", with_tensors([tinfo("a", [8, 1000], 0, 0)], f32(8)), r"beyond end of file"),
    ("duplicate tensor name", with_tensors([tinfo("a", [8], 0, 0), tinfo("a", [8], 0, 32)], f32(16)),
     r"duplicate tensor name 'a'"),
    ("empty tensor name", with_tensors([tinfo("", [8], 0, 0)], f32(8)), r"empty name"),
    ("tensor name of 64 bytes", with_tensors([tinfo("n" * 64, [8], 0, 0)], f32(8)), r"name length 64 exceeds"),
    ("tensor name not UTF-8", with_tensors([tinfo(b"a\xff", [8], 0, 0)], f32(8)), r"not valid UTF-8"),
    ("tensor count says 3, has 2", header(3, len(KVS)) + G.write(KVS, T1)[24:], r"(truncated|tensor)"),
    ("split.count 3 in a plain file name", G.write(KVS + [("split.count", G.U16, G.kv_raw(G.U16, 3))], T1),
     r"shard 1 of a 3-file split model"),
]
for name, blob, want in crafted:
    put(blob)
    rc, out, err = info()
    sw.judge("crafted: " + name, rc, out, err, must=(r"bad\.gguf", want))

# ---- NaN and Inf weights ---------------------------------------------------------------------
_, ts = G.load(base)
for name, tname, val in [("NaN norm", "output_norm.weight", float("nan")), ("Inf matrix", "blk.1.attn_v.weight", float("inf")),
                         ("-Inf embedding row", "token_embd.weight", float("-inf"))]:
    out = []
    for n, tt, dims, d in ts:
        if n == tname:
            one = struct.pack("<f", val) if tt == 0 else struct.pack("<e", val)
            if "embedding" in name:  # every row: whatever the prompt's tokens are
                d = one * (len(d) // len(one))
            else:
                d = one + d[len(one):]
        out.append((n, tt, dims, d))
    put(G.write(g.kvs, out, g.alignment))
    rc, o, e = sw.run([BIN, "run", "-m", bad, "-p", "hi", "-n", "3", "--temp", "0", "-t", "1"])
    sw.judge("weights: " + name, rc, o, e, must=(r"logits are not finite", r"tensor '%s' holds" % tname.replace(".", r"\.")))
sys.exit(sw.finish())
