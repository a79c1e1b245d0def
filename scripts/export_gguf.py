#!/usr/bin/python3
"""export_gguf.py -- write the demo MoE student (scripts/train_demo_moe.py checkpoint) as GGUF.

A minimal GGUF v3 writer written from /work/shared/docs/formats.md section 1 (not gguf-py):
header, KV pairs, tensor infos, zero padding to general.alignment (32), tensor data each
padded to 32 bytes, offsets = running sum of padded sizes.

  /usr/bin/python3 scripts/export_gguf.py --ckpt tmp/demo-moe/student.pt --type q8_0 -o models/demo-moe-q8_0.gguf

Types: --type f16 (2-D/3-D weights F16) or q8_0 (2-D/3-D weights Q8_0). Always F32: 1-D norm
weights and the routers (ffn_gate_inp), as llama-quantize leaves them.
Q8_0 (formats.md 2.3): per 32 values, d = amax/127 stored as f16, q = roundf(x * (1/d)) with
ties away from zero, exactly as ggml's quantize_row_q8_0_ref computes it in float32.
Tokenizer: SPM ("llama") from llama2.c tok512.bin, spaces as U+2581, types <unk> 2,
<s> </s> 3, <0xXX> 6, others 1; bos 1, eos 2, unk 0, add_bos true, add_space_prefix true
(llama2.c's encoder prepends a dummy space).
"""
import argparse
import os
import struct
import sys

import numpy as np

ALIGN = 32
T_F32, T_F16, T_Q8_0 = 0, 1, 8
GT_U8, GT_I8, GT_U16, GT_I16, GT_U32, GT_I32, GT_F32, GT_BOOL, GT_STR, GT_ARR, GT_U64 = \
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10


def gstr(s):
    b = s.encode("utf-8") if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


class Writer:
    def __init__(self):
        self.kv = []       # (key, bytes of type+value)
        self.tensors = []  # (name, ne list, ggml type, raw bytes)

    def add(self, key, gtype, value):
        if gtype == GT_STR:
            v = gstr(value)
        elif gtype == GT_BOOL:
            v = struct.pack("<B", 1 if value else 0)
        else:
            v = struct.pack("<" + {GT_U32: "I", GT_I32: "i", GT_F32: "f", GT_U64: "Q",
                                   GT_U8: "B", GT_U16: "H"}[gtype], value)
        self.kv.append((key, struct.pack("<I", gtype) + v))

    def add_arr(self, key, etype, values):
        body = struct.pack("<IIQ", GT_ARR, etype, len(values))
        if etype == GT_STR:
            body += b"".join(gstr(x) for x in values)
        elif etype == GT_F32:
            body += np.asarray(values, dtype="<f4").tobytes()
        elif etype == GT_I32:
            body += np.asarray(values, dtype="<i4").tobytes()
        else:
            raise ValueError("array type %d" % etype)
        self.kv.append((key, body))

    def add_tensor(self, name, arr, ttype):
        """arr: numpy array in PyTorch order [.., out, in]; GGUF ne = reversed shape."""
        assert len(name.encode()) < 64
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(reversed(arr.shape))
        if ttype == T_F32:
            raw = arr.astype("<f4").tobytes()
        elif ttype == T_F16:
            raw = arr.astype("<f2").tobytes()
        elif ttype == T_Q8_0:
            raw = quantize_q8_0(arr)
        else:
            raise ValueError(ttype)
        self.tensors.append((name, ne, ttype, raw))

    def write(self, path):
        keys = [k for k, _ in self.kv]
        assert len(keys) == len(set(keys)), "duplicate keys"
        out = bytearray()
        out += b"GGUF" + struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, v in self.kv:
            out += gstr(k) + v
        off = 0
        for name, ne, tt, raw in self.tensors:
            out += gstr(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
            out += struct.pack("<IQ", tt, off)
            off += (len(raw) + ALIGN - 1) // ALIGN * ALIGN
        out += b"\0" * (-len(out) % ALIGN)
        for name, ne, tt, raw in self.tensors:
            out += raw + b"\0" * (-len(raw) % ALIGN)
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
        return len(out)


def quantize_q8_0(arr):
    """ggml quantize_row_q8_0_ref: d = amax/127; id = d ? 1/d : 0; q = roundf(x*id)."""
    x = arr.reshape(-1, 32).astype(np.float32)
    amax = np.abs(x).max(axis=1)
    d = (amax / np.float32(127.0)).astype(np.float32)
    with np.errstate(divide="ignore"):
        idv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    v = (x * idv[:, None]).astype(np.float32)
    q = (np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))).astype(np.int8)  # roundf: ties away
    blocks = np.zeros(x.shape[0], dtype=[("d", "<f2"), ("qs", "i1", (32,))])
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q
    return blocks.tobytes()


def read_tok512(path, n_vocab):
    b = open(path, "rb").read()
    o = 4
    toks, scores, types = [], [], []
    for i in range(n_vocab):
        s, n = struct.unpack_from("<fi", b, o)
        o += 8
        t = b[o:o + n]
        o += n
        if i == 0:
            t, ty = b"<unk>", 2
        elif i == 1:
            t, ty = b"<s>", 3
        elif i == 2:
            t, ty = b"</s>", 3
        elif len(t) == 6 and t.startswith(b"<0x") and t.endswith(b">"):
            ty = 6
        else:
            ty = 1
            t = t.replace(b" ", "\u2581".encode())
        toks.append(t)
        scores.append(s)
        types.append(ty)
    return toks, scores, types


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    fix = os.environ.get("DELTAFIN_FIXTURES", os.path.join(root, "..", "shared", "fixtures"))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", default=os.path.join(root, "tmp", "demo-moe", "student.pt"))
    ap.add_argument("--tokenizer", default=os.path.join(fix, "models", "tok512.bin"))
    ap.add_argument("--type", choices=["f16", "q8_0"], default="q8_0")
    ap.add_argument("--name", default="deltafin-demo-moe")
    ap.add_argument("-o", "--output", required=True)
    a = ap.parse_args()

    import torch  # only needed to read the checkpoint
    ck = torch.load(a.ckpt, map_location="cpu", weights_only=False)
    cfg, sd = ck["cfg"], {k: v.float().numpy() for k, v in ck["model"].items()}
    D, L, H, KV = cfg["dim"], cfg["n_layers"], cfg["n_heads"], cfg["n_kv_heads"]
    E, K, Fw, V = cfg["n_experts"], cfg["n_experts_used"], cfg["expert_ff"], cfg["vocab_size"]
    hd = D // H
    wt = T_F16 if a.type == "f16" else T_Q8_0

    w = Writer()
    A = "llama"
    w.add("general.architecture", GT_STR, A)
    w.add("general.name", GT_STR, a.name)
    w.add("general.description", GT_STR,
          "Tiny TinyStories-style Mixtral-type MoE (%d experts, top-%d) distilled from llama2.c "
          "stories260K; demo model of deltafin" % (E, K))
    w.add("general.license", GT_STR, "MIT")
    w.add("general.source.url", GT_STR, "https://github.com/karpathy/llama2.c (stories260K teacher)")
    w.add("general.file_type", GT_U32, 1 if a.type == "f16" else 7)
    w.add("general.quantization_version", GT_U32, 2)
    w.add("general.alignment", GT_U32, ALIGN)
    w.add(A + ".context_length", GT_U32, cfg["seq_len"])
    w.add(A + ".embedding_length", GT_U32, D)
    w.add(A + ".block_count", GT_U32, L)
    w.add(A + ".feed_forward_length", GT_U32, Fw)
    w.add(A + ".attention.head_count", GT_U32, H)
    w.add(A + ".attention.head_count_kv", GT_U32, KV)
    w.add(A + ".attention.layer_norm_rms_epsilon", GT_F32, cfg["norm_eps"])
    w.add(A + ".rope.dimension_count", GT_U32, hd)
    w.add(A + ".rope.freq_base", GT_F32, cfg["rope_base"])
    w.add(A + ".expert_count", GT_U32, E)
    w.add(A + ".expert_used_count", GT_U32, K)
    w.add(A + ".vocab_size", GT_U32, V)
    toks, scores, types = read_tok512(a.tokenizer, V)
    w.add("tokenizer.ggml.model", GT_STR, "llama")
    w.add_arr("tokenizer.ggml.tokens", GT_STR, toks)
    w.add_arr("tokenizer.ggml.scores", GT_F32, scores)
    w.add_arr("tokenizer.ggml.token_type", GT_I32, types)
    w.add("tokenizer.ggml.bos_token_id", GT_U32, 1)
    w.add("tokenizer.ggml.eos_token_id", GT_U32, 2)
    w.add("tokenizer.ggml.unknown_token_id", GT_U32, 0)
    w.add("tokenizer.ggml.add_bos_token", GT_BOOL, True)
    w.add("tokenizer.ggml.add_eos_token", GT_BOOL, False)
    w.add("tokenizer.ggml.add_space_prefix", GT_BOOL, True)

    w.add_tensor("token_embd.weight", sd["tok"], wt)
    for l in range(L):
        p = "layers.%d." % l
        b = "blk.%d." % l
        w.add_tensor(b + "attn_norm.weight", sd[p + "attn_norm"], T_F32)
        # student already uses NORM rope on adjacent pairs: q/k rows are written as they are
        w.add_tensor(b + "attn_q.weight", sd[p + "wq"], wt)
        w.add_tensor(b + "attn_k.weight", sd[p + "wk"], wt)
        w.add_tensor(b + "attn_v.weight", sd[p + "wv"], wt)
        w.add_tensor(b + "attn_output.weight", sd[p + "wo"], wt)
        w.add_tensor(b + "ffn_norm.weight", sd[p + "ffn_norm"], T_F32)
        w.add_tensor(b + "ffn_gate_inp.weight", sd[p + "router"], T_F32)      # ne {D, E}
        w.add_tensor(b + "ffn_gate_exps.weight", sd[p + "gate"], wt)          # ne {D, F, E}
        w.add_tensor(b + "ffn_up_exps.weight", sd[p + "up"], wt)              # ne {D, F, E}
        w.add_tensor(b + "ffn_down_exps.weight", sd[p + "down"], wt)          # ne {F, D, E}
    w.add_tensor("output_norm.weight", sd["norm"], T_F32)
    w.add_tensor("output.weight", sd["out"], wt)
    n = w.write(a.output)
    print("wrote %s: %d bytes, %d tensors, %d keys" % (a.output, n, len(w.tensors), len(w.kv)))


if __name__ == "__main__":
    sys.exit(main())
