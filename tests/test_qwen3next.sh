#!/bin/sh
# test_qwen3next.sh — qwen3next (Qwen3-Next: Gated DeltaNet + gated attention, MoE with a
# sigmoid-gated shared expert) and qwen35moe (Qwen3.5 MoE: the same with ssm_beta / ssm_alpha,
# broadcast k heads and M-RoPE) against llama.cpp outputs recorded by
# tests/data/expected/{qwen3next,qwen35moe}/make.sh (no llama.cpp needed here):
#   1. each random model (gen-random --arch qwen3next: fused attn_qkv or legacy ssm_in, k heads
#      repeated to v heads, 512 experts top-10, F32 / Q8_0 / Q4_K / MXFP4 experts) is rebuilt
#      bit for bit
#   2. greedy ids of `deltafin run --temp 0` (32 steps, 4 prompts, one of 119 tokens: past the
#      DeltaNet chunk of 64) equal llama.cpp's (a first difference only at a llama.cpp near tie)
#   3. perplexity (-c 128 -b 32) within 0.5% of llama-perplexity
#   4. routed experts streamed through a small expert cache give the same ids as resident
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$@" <<'PYEOF'
import hashlib, os, shutil, sys, tempfile

BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
FIX = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
PPL_TOL = 0.005
env = dict(os.environ, DELTAFIN_FIXTURES=FIX)
for k in ("DELTAFIN_STREAM", "DELTAFIN_EXPERT_CACHE"):
    env.pop(k, None)
tmp = tempfile.mkdtemp(prefix="df_qn_")
sys.path.insert(0, "tests/lib")
from dfcheck import Checker
C = Checker("qwen3next", BIN, env)
report, run_dev, last, read_tsv, greedy, ppl = C.report, C.run_dev, C.last, C.read_tsv, C.greedy, C.ppl

try:
    shutil.copy2(BIN, os.path.join(tmp, "deltafin"))  # a concurrent make may relink BIN
    BIN = C.bin = os.path.join(tmp, "deltafin")
    shutil.copy2(C.dev, os.path.join(tmp, "deltafin-dev"))
    C.dev = os.path.join(tmp, "deltafin-dev")
    for EXP in ("tests/data/expected/qwen3next", "tests/data/expected/qwen35moe"):
        arch = os.path.basename(EXP)
        C.label = arch
        if not os.path.exists(f"{EXP}/models.tsv"):
            report(False, f"{EXP}/models.tsv", "missing"); continue
        path = {}
        for r in read_tsv(f"{EXP}/models.tsv"):
            name, args = r["name"], r["gen_random_args"]
            f = os.path.join(tmp, name + ".gguf")
            rc, _, err = run_dev(["gen-random"] + args.replace("@FIX@", FIX).split() + [f])
            if rc != 0:
                report(False, f"{name} build", last(err)); continue
            sha = hashlib.sha256(open(f, "rb").read()).hexdigest()
            report(sha == r["sha256"], f"{name} rebuilt bit for bit", "" if sha == r["sha256"] else f"sha {sha}")
            path[name] = f
        REC = C.recorded(EXP)
        for r in read_tsv(f"{REC}/greedy.tsv"):
            name = r["name"]
            if name not in path: continue
            got, e = greedy(path[name], r["prompt"])
            if e:
                report(False, f"{name} greedy '{r['prompt'][:40]}'", e); continue
            ok, msg = C.greedy_verdict(got, r)
            report(ok, f"{name} greedy '{r['prompt'][:40]}' ({len(got['prompt_tokens'])} prompt tokens)", msg)
        for r in read_tsv(f"{REC}/ppl.tsv"):
            name, want = r["name"], float(r["ppl"])
            if name not in path: continue
            p, e = ppl(path[name])
            if e:
                report(False, f"{name} perplexity", e); continue
            rel = abs(p - want) / want
            report(rel <= PPL_TOL, f"{name} perplexity", f"{p:.4f} vs llama.cpp {want:.4f} ({100*rel:.3f}%)")
        for name, cache in (("f32", "96K"), ("mxfp4", "64K"), ("e512-q8_0", "64K")) if arch == "qwen3next" else (("mxfp4", "64K"),):
            if name not in path: continue
            prompt = "The little dog ran to the park and"
            ref, e1 = greedy(path[name], prompt, {"DELTAFIN_STREAM": "0"})
            st, e2 = greedy(path[name], prompt, {"DELTAFIN_EXPERT_CACHE": cache}, ["--io", "pread"])
            ok = not e1 and not e2 and ref["tokens"] == st["tokens"] and st["stats"]["expert_misses"] > 0
            report(ok, f"{name} streamed experts ({cache} cache, pread) = resident",
                   e1 or e2 or (f"{st['stats']['expert_misses']} expert reads" if ok else f"{st['tokens']} vs {ref['tokens']}"))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"qwen3next/qwen35moe: {C.n_pass} passed, {C.n_fail} failed")
sys.exit(1 if C.n_fail else 0)
PYEOF
