"""gguf_tool.py — a small GGUF reader/writer for tests (Python standard library only).

parse(data) -> Gguf: the header, every KV (key, type, raw value bytes) and tensor info, with the
file offset where each structural field starts (`marks`: list of (offset, what)), so tests can
cut a file at every structural offset or flip bits inside one section.
write(kvs, tensors, alignment) -> bytes: a GGUF v3 file; kvs are (key, type, raw value bytes),
tensors (name, type, dims, data bytes).
split(path, n): llama.cpp's gguf-split layout (shard 1 has every KV, each shard split.no /
split.count / split.tensors.count and its share of the tensors), written next to path as
NAME-0000K-of-0000N.gguf; returns the part paths.
"""
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<B",
          U64: "<Q", I64: "<q", F64: "<d"}
# ggml type -> (block size, bytes per block)
TYPES = {0: (1, 4), 1: (1, 2), 8: (32, 34), 12: (256, 144), 24: (1, 1), 26: (1, 4), 27: (1, 8), 30: (1, 2)}


class Gguf:
    def __init__(self):
        self.version = 3
        self.kvs = []        # (key, type, raw bytes of the value incl. array header)
        self.tensors = []    # dict(name, dims, type, offset (relative), info_at)
        self.marks = []      # (offset, what)
        self.alignment = 32
        self.data_start = 0


def _value_len(d, pos, t):
    if t in SCALAR:
        return struct.calcsize(SCALAR[t])
    if t == STRING:
        (n,) = struct.unpack_from("<Q", d, pos)
        return 8 + n
    if t == ARRAY:
        at, n = struct.unpack_from("<IQ", d, pos)
        p = pos + 12
        if at in SCALAR:
            return 12 + n * struct.calcsize(SCALAR[at])
        for _ in range(n):
            p += _value_len(d, p, at)
        return p - pos
    raise ValueError("bad KV type %d" % t)


def parse(d):
    g = Gguf()
    m = g.marks
    magic, g.version, nt, nkv = struct.unpack_from("<IIQQ", d, 0)
    m += [(0, "magic"), (4, "version"), (8, "tensor count"), (16, "KV count")]
    pos = 24
    for i in range(nkv):
        m.append((pos, "KV #%d key length" % i))
        (kl,) = struct.unpack_from("<Q", d, pos)
        key = d[pos + 8:pos + 8 + kl].decode("utf-8", "replace")
        m.append((pos + 8, "KV %s key" % key))
        pos += 8 + kl
        m.append((pos, "KV %s type" % key))
        (t,) = struct.unpack_from("<I", d, pos)
        pos += 4
        m.append((pos, "KV %s value" % key))
        n = _value_len(d, pos, t)
        if t == ARRAY:
            m.append((pos + 4, "KV %s array count" % key))
            m.append((pos + 12, "KV %s array data" % key))
        g.kvs.append((key, t, bytes(d[pos:pos + n])))
        if key == "general.alignment":
            (g.alignment,) = struct.unpack_from("<I", d, pos)
        pos += n
    for i in range(nt):
        at = pos
        m.append((pos, "tensor #%d name length" % i))
        (nl,) = struct.unpack_from("<Q", d, pos)
        name = d[pos + 8:pos + 8 + nl].decode("utf-8", "replace")
        m.append((pos + 8, "tensor %s name" % name))
        pos += 8 + nl
        m.append((pos, "tensor %s n_dims" % name))
        (nd,) = struct.unpack_from("<I", d, pos)
        pos += 4
        m.append((pos, "tensor %s dims" % name))
        dims = list(struct.unpack_from("<%dQ" % nd, d, pos))
        pos += 8 * nd
        m.append((pos, "tensor %s type" % name))
        (tt,) = struct.unpack_from("<I", d, pos)
        pos += 4
        m.append((pos, "tensor %s offset" % name))
        (off,) = struct.unpack_from("<Q", d, pos)
        pos += 8
        g.tensors.append(dict(name=name, dims=dims, type=tt, offset=off, info_at=at))
    g.data_start = (pos + g.alignment - 1) // g.alignment * g.alignment if nt else pos
    for t in g.tensors:
        t["abs"] = g.data_start + t["offset"]
        t["nbytes"] = nbytes(t["type"], t["dims"])
        m.append((t["abs"], "tensor %s data" % t["name"]))
    m.append((len(d), "end of file"))
    return g


def nbytes(ttype, dims):
    bs, bb = TYPES[ttype]
    n = 1
    for x in dims:
        n *= x
    return n // bs * bb


def kv_raw(t, v, at=None):
    """raw value bytes of a KV of type t (ARRAY: v is a list of at values)."""
    if t == STRING:
        b = v.encode() if isinstance(v, str) else v
        return struct.pack("<Q", len(b)) + b
    if t == ARRAY:
        return struct.pack("<IQ", at, len(v)) + b"".join(kv_raw(at, x) for x in v)
    return struct.pack(SCALAR[t], v)


def write(kvs, tensors, alignment=32):
    """kvs: (key, type, raw); tensors: (name, type, dims, data)."""
    out = bytearray(struct.pack("<IIQQ", 0x46554747, 3, len(tensors), len(kvs)))
    for key, t, raw in kvs:
        kb = key.encode()
        out += struct.pack("<Q", len(kb)) + kb + struct.pack("<I", t) + raw
    off = 0
    offs = []
    for name, tt, dims, data in tensors:
        nb = name.encode()
        out += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        out += struct.pack("<IQ", tt, off)
        offs.append(off)
        off += (len(data) + alignment - 1) // alignment * alignment
    if tensors:
        out += b"\0" * ((-len(out)) % alignment)
    for i, (name, tt, dims, data) in enumerate(tensors):
        out += data
        if i + 1 < len(tensors):
            out += b"\0" * ((-len(data)) % alignment)
    return bytes(out)


def load(path):
    d = open(path, "rb").read()
    g = parse(d)
    tensors = [(t["name"], t["type"], t["dims"], d[t["abs"]:t["abs"] + t["nbytes"]]) for t in g.tensors]
    return g, tensors


def split(path, n):
    g, tensors = load(path)
    base = path[:-5] if path.endswith(".gguf") else path
    per = (len(tensors) + n - 1) // n
    parts = []
    kvs = [kv for kv in g.kvs if not kv[0].startswith("split.")]
    for k in range(n):
        mine = tensors[k * per:(k + 1) * per]
        sk = [("split.no", U16, struct.pack("<H", k)), ("split.count", U16, struct.pack("<H", n)),
              ("split.tensors.count", I32, struct.pack("<i", len(tensors)))]
        if k == 0:
            sk = kvs + sk
        elif g.alignment != 32:
            sk = sk + [("general.alignment", U32, struct.pack("<I", g.alignment))]
        p = "%s-%05d-of-%05d.gguf" % (base, k + 1, n)
        open(p, "wb").write(write(sk, mine, g.alignment))
        parts.append(p)
    return parts


if __name__ == "__main__":
    if sys.argv[1] == "split":
        for p in split(sys.argv[2], int(sys.argv[3])):
            print(p)
    elif sys.argv[1] == "marks":
        for off, what in parse(open(sys.argv[2], "rb").read()).marks:
            print(off, what)
