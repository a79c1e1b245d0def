#!/usr/bin/python3
"""train_demo_moe.py -- distil the llama2.c stories260K teacher into a small sparse MoE student.

The student is the model shipped as models/demo-moe-{f16,q8_0}.gguf (see models/README.md).
Everything is CPU-only PyTorch, deterministic given the seeds below.

Pipeline (each step is a subcommand; WORK defaults to tmp/demo-moe, which git ignores):

  # 0. check the PyTorch teacher against llama2.c run.c (greedy text from BOS)
  nice -n 10 /usr/bin/python3 scripts/train_demo_moe.py teacher-greedy -n 256
  # 1. sample a corpus of stories from the teacher (T=1.0, top-p 0.9, seed per batch)
  nice -n 10 /usr/bin/python3 scripts/train_demo_moe.py gen-corpus --stories 12000 --seed 1234
  # 2. distil (KL to teacher logits + CE + load-balancing loss), checkpoints in WORK/
  nice -n 10 /usr/bin/python3 scripts/train_demo_moe.py train --steps 1400 --seed 42
  # 3. held-out perplexity of student and teacher, expert usage, greedy story
  nice -n 10 /usr/bin/python3 scripts/train_demo_moe.py eval
  # 4. export (scripts/export_gguf.py)
  /usr/bin/python3 scripts/export_gguf.py --ckpt tmp/demo-moe/student.pt --type f16  -o models/demo-moe-f16.gguf
  /usr/bin/python3 scripts/export_gguf.py --ckpt tmp/demo-moe/student.pt --type q8_0 -o models/demo-moe-q8_0.gguf

Teacher: llama2.c checkpoint format (7 x int32 Config header: dim, hidden_dim, n_layers,
n_heads, n_kv_heads, vocab_size (negative = unshared classifier), seq_len; then the weights
in llama2.c order). Its RoPE rotates adjacent pairs (x[2i], x[2i+1]) of each head, which is
exactly GGUF `llama` NORM rope on unpermuted rows, so the student uses the same convention
and its q/k rows are exported as they are.

Student: GGUF arch `llama` with experts (Mixtral-style): every layer's FFN is E experts of
SwiGLU width F, router = softmax over E, top-2, weights renormalized to sum 1 (exactly the
llama.cpp build_moe_ffn order). Initialised by upcycling: attention/embeddings/norms copied
from the teacher, each expert = the teacher FFN (172 hidden units) + (F-172) new units whose
down projection starts at zero, with a small multiplicative noise per expert to break symmetry.

Story boundaries: llama2.c models end a story by emitting BOS (1). The student is trained to
emit EOS (2) there instead (the teacher's logits for ids 1 and 2 are swapped in the targets),
so that llama.cpp / deltafin stop at the end of a story.

Threads: torch.set_num_threads(1) by default (the build machine is shared); --threads N.
"""
import argparse
import math
import os
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEF_FIX = os.environ.get("DELTAFIN_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
DEF_TEACHER = os.path.join(DEF_FIX, "models", "stories260K.bin")
DEF_TOK = os.path.join(DEF_FIX, "models", "tok512.bin")
DEF_WORK = os.path.join(ROOT, "tmp", "demo-moe")

BOS, EOS = 1, 2


# ---------------------------------------------------------------- tokenizer (llama2.c tok512.bin)
class Tokenizer:
    """llama2.c tokenizer.bin: int max_token_length, then per token: float score, int len, bytes.
    Pieces use ' ' where SentencePiece uses U+2581. encode() mirrors run.c's encode()."""

    def __init__(self, path, vocab_size=512):
        b = open(path, "rb").read()
        (self.max_len,) = struct.unpack_from("<i", b, 0)
        o = 4
        self.pieces, self.scores = [], []
        for _ in range(vocab_size):
            s, n = struct.unpack_from("<fi", b, o)
            o += 8
            self.pieces.append(b[o:o + n])
            o += n
            self.scores.append(s)
        if o != len(b):
            raise ValueError("tokenizer: %d trailing bytes" % (len(b) - o))
        self.lookup = {p: i for i, p in enumerate(self.pieces)}

    def encode(self, text, bos=True):
        ids = [BOS] if bos else []
        if not text:
            return ids
        toks = []
        data = text.encode("utf-8")
        # dummy prefix space (run.c: if text != "" prepend " ")
        toks.append(self.lookup[b" "])
        i = 0
        while i < len(data):
            # one UTF-8 codepoint
            j = i + 1
            while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
                j += 1
            cp = data[i:j]
            if cp in self.lookup:
                toks.append(self.lookup[cp])
            else:
                toks.extend(c + 3 for c in cp)  # byte fallback <0xXX> = id 3 + byte
            i = j
        while True:  # greedy best-score merge, leftmost on ties (run.c)
            best, bid, bi = -1e10, -1, -1
            for k in range(len(toks) - 1):
                m = self.pieces[toks[k]] + self.pieces[toks[k + 1]]
                t = self.lookup.get(m)
                if t is not None and self.scores[t] > best:
                    best, bid, bi = self.scores[t], t, k
            if bi < 0:
                break
            toks[bi:bi + 2] = [bid]
        return ids + toks

    def decode_one(self, prev, tok):
        p = self.pieces[tok]
        if prev == BOS and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        return p

    def decode(self, ids):
        out, prev = b"", BOS
        for t in ids:
            if t in (BOS, EOS):
                prev = t
                continue
            out += self.decode_one(prev, t)
            prev = t
        return out.decode("utf-8", errors="replace")


# ---------------------------------------------------------------- shared model pieces
def rmsnorm(x, w, eps=1e-5):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(seq_len, head_size, base=10000.0):
    # theta_i(p) = p * base^(-2i/head_size); computed in float32 like run.c / ggml
    i = torch.arange(0, head_size, 2, dtype=torch.float32)
    freq = 1.0 / torch.pow(torch.tensor(base, dtype=torch.float32), i / head_size)
    ang = torch.arange(seq_len, dtype=torch.float32)[:, None] * freq[None, :]
    return torch.cos(ang), torch.sin(ang)  # (T, hs/2)


def apply_rope(x, cos, sin):
    """x: (B, T, H, hs); rotate adjacent pairs (2i, 2i+1) = GGUF NORM rope."""
    B, T, H, hs = x.shape
    xr = x.reshape(B, T, H, hs // 2, 2)
    a, b = xr[..., 0], xr[..., 1]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).reshape(B, T, H, hs)


def attention(x, p, cfg, cos, sin, mask):
    B, T, D = x.shape
    H, KV, hs = cfg["n_heads"], cfg["n_kv_heads"], cfg["dim"] // cfg["n_heads"]
    q = (x @ p["wq"].T).view(B, T, H, hs)
    k = (x @ p["wk"].T).view(B, T, KV, hs)
    v = (x @ p["wv"].T).view(B, T, KV, hs)
    q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
    rep = H // KV  # query head h uses kv head h // rep (consecutive heads share)
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
    att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hs))
    att = att.masked_fill(mask[:T, :T], float("-inf"))
    o = torch.softmax(att, dim=-1) @ v
    return o.transpose(1, 2).reshape(B, T, H * hs) @ p["wo"].T


# ---------------------------------------------------------------- teacher (llama2.c)
def load_llama2c(path):
    b = open(path, "rb").read()
    dim, hidden, L, H, KV, vocab, seq_len = struct.unpack_from("<7i", b, 0)
    shared = vocab > 0
    vocab = abs(vocab)
    hs = dim // H
    arr = np.frombuffer(b, dtype="<f4", offset=28)
    o = 0

    def take(*shape):
        nonlocal o
        n = int(np.prod(shape))
        t = torch.from_numpy(arr[o:o + n].copy()).view(*shape)
        o += n
        return t

    w = {}
    w["tok"] = take(vocab, dim)
    w["rms_att"] = take(L, dim)
    w["wq"] = take(L, H * hs, dim)
    w["wk"] = take(L, KV * hs, dim)
    w["wv"] = take(L, KV * hs, dim)
    w["wo"] = take(L, dim, H * hs)
    w["rms_ffn"] = take(L, dim)
    w["w1"] = take(L, hidden, dim)
    w["w2"] = take(L, dim, hidden)
    w["w3"] = take(L, hidden, dim)
    w["rms_final"] = take(dim)
    o += seq_len * hs // 2 * 2  # freq_cis_real / imag (unused)
    w["cls"] = w["tok"] if shared else take(vocab, dim)
    if o != arr.size:
        raise ValueError("teacher: %d floats left over" % (arr.size - o))
    cfg = dict(dim=dim, hidden_dim=hidden, n_layers=L, n_heads=H, n_kv_heads=KV,
               vocab_size=vocab, seq_len=seq_len, shared=shared)
    return cfg, w


class Teacher:
    def __init__(self, path):
        self.cfg, self.w = load_llama2c(path)
        c = self.cfg
        self.cos, self.sin = rope_tables(c["seq_len"], c["dim"] // c["n_heads"])
        self.mask = torch.triu(torch.ones(c["seq_len"], c["seq_len"], dtype=torch.bool), 1)

    def layer(self, l):
        w = self.w
        return dict(wq=w["wq"][l], wk=w["wk"][l], wv=w["wv"][l], wo=w["wo"][l])

    @torch.no_grad()
    def forward(self, tokens):
        """tokens (B, T) -> logits (B, T, V), float32."""
        w, c = self.w, self.cfg
        T = tokens.shape[1]
        h = w["tok"][tokens]
        for l in range(c["n_layers"]):
            x = rmsnorm(h, w["rms_att"][l])
            h = h + attention(x, self.layer(l), c, self.cos[:T], self.sin[:T], self.mask)
            x = rmsnorm(h, w["rms_ffn"][l])
            h = h + (F.silu(x @ w["w1"][l].T) * (x @ w["w3"][l].T)) @ w["w2"][l].T
        return rmsnorm(h, w["rms_final"]) @ w["cls"].T

    @torch.no_grad()
    def sample_batch(self, B, max_len, gen, temp=1.0, topp=0.9):
        """Sample B stories from BOS with a KV cache. Returns list of token lists (the story
        tokens after BOS, ending with the token that ended the story: BOS/EOS, or cut at max_len).
        Finished rows are dropped from the batch every 16 steps (the random stream then depends
        only on the seed, B and max_len, so a corpus is reproducible)."""
        w, c = self.w, self.cfg
        L, H, KV, D = c["n_layers"], c["n_heads"], c["n_kv_heads"], c["dim"]
        hs, rep = D // H, H // KV
        kc = torch.zeros(L, B, KV, max_len, hs)
        vc = torch.zeros(L, B, KV, max_len, hs)
        tok = torch.full((B,), BOS, dtype=torch.long)
        rows = torch.arange(B)           # original row of each active row
        out = torch.zeros(B, max_len, dtype=torch.long)
        lengths = torch.full((B,), max_len, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)  # per active row
        for pos in range(max_len):
            n = tok.shape[0]
            h = w["tok"][tok]  # (n, D)
            cos, sin = self.cos[pos:pos + 1], self.sin[pos:pos + 1]
            for l in range(L):
                x = rmsnorm(h, w["rms_att"][l])
                q = apply_rope((x @ w["wq"][l].T).view(n, 1, H, hs), cos, sin)[:, 0]
                k = apply_rope((x @ w["wk"][l].T).view(n, 1, KV, hs), cos, sin)[:, 0]
                kc[l, :, :, pos] = k
                vc[l, :, :, pos] = (x @ w["wv"][l].T).view(n, KV, hs)
                qg = q.view(n, KV, rep, hs)  # query head h uses kv head h // rep
                att = torch.einsum("bgrd,bgpd->bgrp", qg, kc[l, :, :, :pos + 1]) / math.sqrt(hs)
                o = torch.einsum("bgrp,bgpd->bgrd", torch.softmax(att, -1),
                                 vc[l, :, :, :pos + 1]).reshape(n, D)
                h = h + o @ w["wo"][l].T
                x = rmsnorm(h, w["rms_ffn"][l])
                h = h + (F.silu(x @ w["w1"][l].T) * (x @ w["w3"][l].T)) @ w["w2"][l].T
            logits = rmsnorm(h, w["rms_final"]) @ w["cls"].T
            probs = torch.softmax(logits / temp, -1)
            sp, si = torch.sort(probs, -1, descending=True)
            cum = torch.cumsum(sp, -1)
            sp = torch.where(cum - sp < topp, sp, torch.zeros_like(sp))
            pick = torch.multinomial(sp, 1, generator=gen)[:, 0]
            nxt = si.gather(1, pick[:, None])[:, 0]
            out[rows, pos] = nxt
            ended = (~done) & ((nxt == BOS) | (nxt == EOS))
            lengths[rows[ended]] = pos + 1
            done |= ended
            if bool(done.all()):
                break
            tok = nxt
            if pos % 16 == 15 and bool(done.any()):
                keep = (~done).nonzero()[:, 0]
                kc, vc = kc[:, keep].contiguous(), vc[:, keep].contiguous()
                tok, rows, done = tok[keep], rows[keep], done[keep]
        return [out[b, :lengths[b]].tolist() for b in range(B)]


# ---------------------------------------------------------------- student (llama arch with experts)
class Student(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D, V, L = cfg["dim"], cfg["vocab_size"], cfg["n_layers"]
        H, KV = cfg["n_heads"], cfg["n_kv_heads"]
        hs = D // H
        E, Fw = cfg["n_experts"], cfg["expert_ff"]
        P = torch.nn.Parameter
        self.tok = P(torch.zeros(V, D))
        self.out = P(torch.zeros(V, D))
        self.norm = P(torch.ones(D))
        self.layers = torch.nn.ModuleList()
        for _ in range(L):
            m = torch.nn.Module()
            m.attn_norm = P(torch.ones(D))
            m.wq = P(torch.zeros(H * hs, D))
            m.wk = P(torch.zeros(KV * hs, D))
            m.wv = P(torch.zeros(KV * hs, D))
            m.wo = P(torch.zeros(D, H * hs))
            m.ffn_norm = P(torch.ones(D))
            m.router = P(torch.zeros(E, D))
            m.gate = P(torch.zeros(E, Fw, D))
            m.up = P(torch.zeros(E, Fw, D))
            m.down = P(torch.zeros(E, D, Fw))
            self.layers.append(m)
        self.cos, self.sin = rope_tables(cfg["seq_len"], hs, cfg["rope_base"])
        self.mask = torch.triu(torch.ones(cfg["seq_len"], cfg["seq_len"], dtype=torch.bool), 1)

    def moe(self, m, x, stats):
        """x: (N, D). Exactly llama.cpp build_moe_ffn for the llama arch: softmax over E,
        top-k, w = s[idx] / max(sum, 2^-14), y = sum_j w_j * expert_{idx_j}(x)."""
        E, k = self.cfg["n_experts"], self.cfg["n_experts_used"]
        logits = x @ m.router.T
        s = torch.softmax(logits, dim=-1)
        topv, topi = torch.topk(s, k, dim=-1)
        wts = topv / topv.sum(-1, keepdim=True).clamp(min=6.103515625e-5)
        y = torch.zeros_like(x)
        counts = torch.bincount(topi.reshape(-1), minlength=E)
        for e in range(E):
            if int(counts[e]) == 0:
                continue
            tok_i, slot = (topi == e).nonzero(as_tuple=True)
            xe = x[tok_i]
            a = F.silu(xe @ m.gate[e].T) * (xe @ m.up[e].T)
            ye = (a @ m.down[e].T) * wts[tok_i, slot][:, None]
            y = y.index_add(0, tok_i, ye)
        if stats is not None:
            stats.append((counts, s))
        return y

    def forward(self, tokens, stats=None):
        c = self.cfg
        B, T = tokens.shape
        h = self.tok[tokens]
        cos, sin = self.cos[:T], self.sin[:T]
        for m in self.layers:
            x = rmsnorm(h, m.attn_norm, c["norm_eps"])
            h = h + attention(x, dict(wq=m.wq, wk=m.wk, wv=m.wv, wo=m.wo), c, cos, sin, self.mask)
            x = rmsnorm(h, m.ffn_norm, c["norm_eps"])
            h = h + self.moe(m, x.reshape(B * T, -1), stats).view(B, T, -1)
        return rmsnorm(h, self.norm, c["norm_eps"]) @ self.out.T


def student_config(tcfg, n_experts, expert_ff):
    return dict(dim=tcfg["dim"], n_layers=tcfg["n_layers"], n_heads=tcfg["n_heads"],
                n_kv_heads=tcfg["n_kv_heads"], vocab_size=tcfg["vocab_size"],
                seq_len=tcfg["seq_len"], n_experts=n_experts, n_experts_used=2,
                expert_ff=expert_ff, norm_eps=1e-5, rope_base=10000.0)


@torch.no_grad()
def upcycle(student, teacher, gen, noise):
    tw, c = teacher.w, student.cfg
    student.tok.copy_(tw["tok"])
    student.out.copy_(tw["cls"])
    student.norm.copy_(tw["rms_final"])
    hid = teacher.cfg["hidden_dim"]
    Fw, E, D = c["expert_ff"], c["n_experts"], c["dim"]
    for l, m in enumerate(student.layers):
        m.attn_norm.copy_(tw["rms_att"][l])
        m.ffn_norm.copy_(tw["rms_ffn"][l])
        for n in ("wq", "wk", "wv", "wo"):
            getattr(m, n).copy_(tw[n][l])
        m.router.copy_(torch.randn(E, D, generator=gen) * 0.1)
        for e in range(E):
            def jitter(t):
                return t * (1.0 + noise * torch.randn(t.shape, generator=gen))
            g = torch.randn(Fw, D, generator=gen) * tw["w1"][l].std()
            u = torch.randn(Fw, D, generator=gen) * tw["w3"][l].std()
            d = torch.zeros(D, Fw)
            g[:hid], u[:hid], d[:, :hid] = jitter(tw["w1"][l]), jitter(tw["w3"][l]), jitter(tw["w2"][l])
            m.gate[e].copy_(g)
            m.up[e].copy_(u)
            m.down[e].copy_(d)


def load_student(path):
    ck = torch.load(path, map_location="cpu", weights_only=False)
    s = Student(ck["cfg"])
    s.load_state_dict(ck["model"])
    return s, ck


# ---------------------------------------------------------------- corpus
def load_corpus(work):
    z = np.load(os.path.join(work, "corpus.npz"))
    toks, offs = z["tokens"].astype(np.int64), z["offsets"]
    stories = [toks[offs[i]:offs[i + 1]] for i in range(len(offs) - 1)]
    n_val = int(z["n_val"])
    return stories[:-n_val], stories[-n_val:]


def make_batches(stories, max_tokens, rng):
    """Batches of similar-length stories, each padded to its longest; order shuffled."""
    order = sorted(range(len(stories)), key=lambda i: (len(stories[i]), i))
    batches, cur, cur_max = [], [], 0
    for i in order:
        n = len(stories[i])
        if cur and max(cur_max, n) * (len(cur) + 1) > max_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, n)
    if cur:
        batches.append(cur)
    rng.shuffle(batches)
    return batches


def collate(stories, idx):
    """input = BOS + story[:-1]; target = story with the teacher's end-of-story BOS turned into EOS;
    pad target = -1."""
    T = max(len(stories[i]) for i in idx)
    inp = torch.zeros(len(idx), T, dtype=torch.long)
    tgt = torch.full((len(idx), T), -1, dtype=torch.long)
    for r, i in enumerate(idx):
        s = torch.from_numpy(stories[i])
        n = len(s)
        inp[r, 0] = BOS
        inp[r, 1:n] = s[:-1]
        t = s.clone()
        t[t == BOS] = EOS
        tgt[r, :n] = t
    return inp, tgt


def teacher_target_logits(teacher, inp):
    tl = teacher.forward(inp)
    return tl[..., [0, 2, 1] + list(range(3, tl.shape[-1]))]  # swap BOS/EOS columns


# ---------------------------------------------------------------- subcommands
def cmd_teacher_greedy(a):
    t = Teacher(a.teacher)
    tok = Tokenizer(a.tokenizer, t.cfg["vocab_size"])
    ids = tok.encode(a.prompt, bos=True)
    while len(ids) < a.n + 1:  # run.c prints `steps` tokens after BOS
        nxt = int(t.forward(torch.tensor([ids]))[0, -1].argmax())
        if nxt == BOS:
            break
        ids.append(nxt)
    sys.stdout.write(tok.decode(ids[1:]) + "\n")


def cmd_gen_corpus(a):
    t = Teacher(a.teacher)
    os.makedirs(a.work, exist_ok=True)
    stories = []
    t0 = time.time()
    b = 0
    while len(stories) < a.stories:
        gen = torch.Generator().manual_seed(a.seed + b)
        stories.extend(t.sample_batch(a.batch, t.cfg["seq_len"], gen, a.temp, a.topp))
        b += 1
        ntok = sum(len(s) for s in stories)
        print("batch %d: %d stories, %d tokens, %.0fs" % (b, len(stories), ntok, time.time() - t0),
              flush=True)
        save_corpus(a, stories[:a.stories])


def save_corpus(a, stories):
    lens = np.array([len(s) for s in stories])
    offs = np.concatenate([[0], np.cumsum(lens)])
    toks = np.concatenate([np.array(s, dtype=np.int16) for s in stories])
    n_val = max(1, int(len(stories) * a.val_frac))
    tmp = os.path.join(a.work, "corpus.tmp.npz")
    np.savez(tmp, tokens=toks, offsets=offs, n_val=n_val,
             seed=a.seed, temp=a.temp, topp=a.topp, batch=a.batch)
    os.replace(tmp, os.path.join(a.work, "corpus.npz"))
    ended = sum(1 for s in stories if s[-1] in (BOS, EOS))
    print("corpus: %d stories (%d held out), %d tokens, mean %.1f, %d ended naturally"
          % (len(stories), n_val, toks.size, lens.mean(), ended))


def cmd_train(a):
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)
    rng = np.random.default_rng(a.seed)
    teacher = Teacher(a.teacher)
    train, val = load_corpus(a.work)
    ck_path = os.path.join(a.work, "student.pt")
    cfg = student_config(teacher.cfg, a.experts, a.expert_ff)
    student = Student(cfg)
    upcycle(student, teacher, torch.Generator().manual_seed(a.seed), a.noise)
    opt = torch.optim.AdamW(student.parameters(), lr=a.lr, betas=(0.9, 0.95), weight_decay=0.0)
    step, epoch, bpos = 0, 0, 0
    batches = make_batches(train, a.batch_tokens, rng)
    if a.resume and os.path.exists(ck_path):
        s2, ck = load_student(ck_path)
        student.load_state_dict(s2.state_dict())
        opt.load_state_dict(ck["opt"])
        step, epoch, bpos = ck["step"], ck["epoch"], ck["bpos"]
        rng = np.random.default_rng(a.seed + 1000 * epoch)
        batches = make_batches(train, a.batch_tokens, rng)
        print("resumed at step %d" % step)
    n_params = sum(p.numel() for p in student.parameters())
    print("student: %d params, cfg %s; %d train / %d val stories, %d batches/epoch"
          % (n_params, cfg, len(train), len(val), len(batches)), flush=True)
    deadline = None
    if a.deadline:
        hh, mm = map(int, a.deadline.split(":"))
        lt = time.localtime()
        deadline = time.mktime(lt[:3] + (hh, mm, 0) + lt[6:])
    t0, last_save = time.time(), time.time()
    E = cfg["n_experts"]
    usage = torch.zeros(cfg["n_layers"], E)
    meter = []

    def save(final=False):
        tmp = ck_path + ".tmp"
        torch.save(dict(cfg=cfg, model=student.state_dict(), opt=opt.state_dict(), step=step,
                        epoch=epoch, bpos=bpos, args=vars(a), usage=usage,
                        train_seconds=time.time() - t0, final=final), tmp)
        os.replace(tmp, ck_path)

    while step < a.steps:
        if bpos >= len(batches):
            epoch += 1
            bpos = 0
            rng = np.random.default_rng(a.seed + 1000 * epoch)
            batches = make_batches(train, a.batch_tokens, rng)
        inp, tgt = collate(train, batches[bpos])
        bpos += 1
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * \
            (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / a.steps))))
        for g in opt.param_groups:
            g["lr"] = lr
        with torch.no_grad():
            tlog = teacher_target_logits(teacher, inp)
        stats = []
        slog = student(inp, stats)
        valid = tgt >= 0
        lp_s = F.log_softmax(slog[valid], -1)
        lp_t = F.log_softmax(tlog[valid], -1)
        kl = (lp_t.exp() * (lp_t - lp_s)).sum(-1).mean()
        ce = F.nll_loss(lp_s, tgt[valid])
        # Switch-style load balancing: E * sum_e f_e * P_e over the real (non-pad) tokens
        vflat = valid.reshape(-1)
        aux = 0.0
        for l, (counts, s) in enumerate(stats):
            sv = s[vflat]
            topi = torch.topk(sv, cfg["n_experts_used"], -1).indices
            f = torch.bincount(topi.reshape(-1), minlength=E).float() / topi.numel()
            aux = aux + E * (f * sv.mean(0)).sum()
            usage[l] += f * vflat.sum()
        aux = aux / len(stats)
        loss = kl + a.ce * ce + a.aux * aux
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(student.parameters(), 1.0)
        opt.step()
        step += 1
        meter.append((kl.item(), ce.item(), float(aux), int(valid.sum())))
        if step % a.log_every == 0 or step == a.steps:
            m = np.array(meter)
            el = time.time() - t0
            print("step %d ep %d lr %.2e kl %.4f ce %.4f aux %.4f | %.0f tok/s %.0fs"
                  % (step, epoch, lr, m[:, 0].mean(), m[:, 1].mean(), m[:, 2].mean(),
                     m[:, 3].sum() / max(1e-9, el - meter_t0[0]), el), flush=True)
            meter.clear()
            meter_t0[0] = el
        if time.time() - last_save > a.save_every:
            save()
            last_save = time.time()
        if deadline and time.time() > deadline:
            print("deadline reached at step %d (reproduce with --stop-at %d)" % (step, step))
            break
        if a.stop_at and step >= a.stop_at:
            break
    save(final=step >= a.steps)
    print("saved %s at step %d (%.0fs)" % (ck_path, step, time.time() - t0))


meter_t0 = [0.0]


@torch.no_grad()
def nll_sum(model_fn, stories, batch_tokens):
    tot, n = 0.0, 0
    batches = make_batches(stories, batch_tokens, np.random.default_rng(0))
    for idx in batches:
        inp, tgt = collate(stories, idx)
        lg = model_fn(inp)
        valid = tgt >= 0
        tot += F.cross_entropy(lg[valid], tgt[valid], reduction="sum").item()
        n += int(valid.sum())
    return tot, n


@torch.no_grad()
def student_greedy(student, tok, prompt, n):
    prompt_ids = tok.encode(prompt, bos=True)
    ids, gen = list(prompt_ids), []
    while len(gen) < n and len(ids) < student.cfg["seq_len"]:
        nxt = int(student(torch.tensor([ids]))[0, -1].argmax())
        gen.append(nxt)
        if nxt == EOS:
            break
        ids.append(nxt)
    return prompt_ids, gen


def cmd_eval(a):
    teacher = Teacher(a.teacher)
    tok = Tokenizer(a.tokenizer)
    student, ck = load_student(a.ckpt)
    student.eval()
    _, val = load_corpus(a.work)
    if a.val_stories:
        val = val[:a.val_stories]
    t_nll, n = nll_sum(lambda x: teacher_target_logits(teacher, x), val, a.batch_tokens)
    stats = []
    s_nll, n2 = nll_sum(lambda x: student(x, stats), val, a.batch_tokens)
    assert n == n2
    tp, sp = math.exp(t_nll / n), math.exp(s_nll / n)
    print("held-out: %d stories, %d tokens" % (len(val), n))
    print("teacher ppl %.4f  student ppl %.4f  ratio %.4f" % (tp, sp, sp / tp))
    L, E = student.cfg["n_layers"], student.cfg["n_experts"]
    cnt = torch.zeros(L, E)
    # stats also include padded rows; count only on a fresh unpadded pass over a few stories
    for i, st in enumerate(val[:200]):
        inp, _ = collate(val, [i])
        s2 = []
        student(inp, s2)
        for l, (c, _) in enumerate(s2):
            cnt[l] += c.float()
    print("expert usage (share of top-2 selections, %%) over %d held-out tokens:" % (cnt[0].sum() / 2))
    for l in range(L):
        sh = 100 * cnt[l] / cnt[l].sum()
        print("  layer %d: %s  max/min %.1f" % (l, " ".join("%5.1f" % v for v in sh.tolist()),
                                                (sh.max() / sh.min().clamp(min=1e-9)).item()))
    ids, gen = student_greedy(student, tok, a.prompt, a.n)
    print("greedy student (%d tokens): %s" % (len(gen), repr(tok.decode(ids[1:] + gen))))
    print("greedy student ids: %s" % gen)
    print("train steps %s, %.0f s" % (ck.get("step"), ck.get("train_seconds", 0)))


def main():
    torch.set_flush_denormal(True)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", default=DEF_TEACHER)
    ap.add_argument("--tokenizer", default=DEF_TOK)
    ap.add_argument("--work", default=DEF_WORK)
    ap.add_argument("--threads", type=int, default=1)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("teacher-greedy")
    p.add_argument("-p", "--prompt", default="")
    p.add_argument("-n", type=int, default=256, help="total steps incl. BOS and prompt (as run.c)")
    p = sub.add_parser("gen-corpus")
    p.add_argument("--stories", type=int, default=12000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--temp", type=float, default=1.0)
    p.add_argument("--topp", type=float, default=0.9)
    p.add_argument("--val-frac", type=float, default=0.04)
    p = sub.add_parser("train")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--steps", type=int, default=1400)
    p.add_argument("--experts", type=int, default=16)
    p.add_argument("--expert-ff", type=int, default=192)
    p.add_argument("--noise", type=float, default=0.02)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--batch-tokens", type=int, default=1024)
    p.add_argument("--ce", type=float, default=0.25)
    p.add_argument("--aux", type=float, default=0.01)
    p.add_argument("--log-every", type=int, default=20)
    p.add_argument("--save-every", type=float, default=120.0, help="seconds")
    p.add_argument("--deadline", default=None, help="HH:MM local: stop and save by then")
    p.add_argument("--stop-at", type=int, default=0, help="stop after this step (schedule still uses --steps)")
    p.add_argument("--resume", action="store_true")
    p = sub.add_parser("eval")
    p.add_argument("--ckpt", default=os.path.join(DEF_WORK, "student.pt"))
    p.add_argument("--val-stories", type=int, default=0)
    p.add_argument("--batch-tokens", type=int, default=1024)
    p.add_argument("-p", "--prompt", default="Once upon a time")
    p.add_argument("-n", type=int, default=200)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    {"teacher-greedy": cmd_teacher_greedy, "gen-corpus": cmd_gen_corpus, "train": cmd_train,
     "eval": cmd_eval}[a.cmd](a)


if __name__ == "__main__":
    main()
