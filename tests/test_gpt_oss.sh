#!/bin/sh
# test_gpt_oss.sh — gpt-oss against outputs recorded from llama.cpp
# (tests/data/expected/gpt_oss/make.sh). No llama.cpp needed. Random models with attention
# sinks, q/k/v/o biases, alternating sliding-window layers (window 8, shorter than every run),
# router and per-expert biases, the clamped SwiGLU and YaRN, at F32 / F16 / Q8_0, MXFP4 experts
# (gen-random and `deltafin quantize`, = llama-quantize's MXFP4_MOE) and Q4_K (--pure):
#   1. gen-random (and quantize) rebuild the recorded models bit for bit (sha256)
#   2. greedy ids of `deltafin run --temp 0 -n 32` = llama.cpp's (4 prompts each)
#   3. `deltafin perplexity -c 128 -b 32` within 0.5% of llama-perplexity
#   4. routed experts streamed from disk through a 2-slot cache, and packed, give the same ids
#   5. `deltafin info` on a gpt-oss-120b-shaped sparse file: KV bytes per token, expert size
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$@" <<'PYEOF'
import hashlib, json, os, re, shutil, subprocess, sys, tempfile

BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
FIX = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
EXP = "tests/data/expected/gpt_oss"
PPL_TOL = 0.005
env = dict(os.environ, DELTAFIN_FIXTURES=FIX)
tmp = tempfile.mkdtemp(prefix="df_gptoss_")
sys.path.insert(0, "tests/lib")
from dfcheck import Checker
C = Checker("gpt-oss", BIN, env)
report, run, run_dev, last, read_tsv, greedy, ppl = C.report, C.run, C.run_dev, C.last, C.read_tsv, C.greedy, C.ppl

try:
    shutil.copy2(BIN, os.path.join(tmp, "deltafin"))  # a concurrent make may relink BIN
    BIN = C.bin = os.path.join(tmp, "deltafin")
    shutil.copy2(C.dev, os.path.join(tmp, "deltafin-dev"))
    C.dev = os.path.join(tmp, "deltafin-dev")
    models = read_tsv(f"{EXP}/models.tsv")
    REC = C.recorded(EXP)
    greedy_rows = read_tsv(f"{REC}/greedy.tsv")
    ppl_rows = read_tsv(f"{REC}/ppl.tsv")
    ppls = {r["name"]: float(r["ppl"]) for r in ppl_rows}
    path = {}
    for r in models:
        name, args = r["name"], r["gen_random_args"]
        f = os.path.join(tmp, name + ".gguf")
        if " | quantize " in args:
            g, q = args.split(" | quantize ")
            rc, _, err = run_dev(["gen-random"] + g.replace("@FIX@", FIX).split() + [f + ".f32"])
            if rc == 0:
                rc, _, err = run(["quantize", f + ".f32", f] + q.split() + ["-t", "2"])
            if os.path.exists(f + ".f32"): os.unlink(f + ".f32")
        else:
            rc, _, err = run_dev(["gen-random"] + args.replace("@FIX@", FIX).split() + [f])
        if rc != 0:
            report(False, f"{name} build", last(err))
            continue
        sha = hashlib.sha256(open(f, "rb").read()).hexdigest()
        report(sha == r["sha256"], f"{name} rebuilt bit for bit", "" if sha == r["sha256"] else f"sha {sha}")
        path[name] = f
    for r in greedy_rows:
        name = r["name"]
        if name not in path: continue
        got, e = greedy(path[name], r["prompt"])
        if e:
            report(False, f"{name} greedy '{r['prompt']}'", e); continue
        C.check_greedy(name, r, got)
    for name, want in ppls.items():
        if name not in path: continue
        p, e = ppl(path[name])
        if e:
            report(False, f"{name} perplexity", e); continue
        rel = abs(p - want) / want
        msg = f"{p:.4f} vs llama.cpp {want:.4f} ({100*rel:.3f}%)"
        report(rel <= PPL_TOL, f"{name} perplexity", msg)
    # 4. streaming: routed experts from disk through 2 cache slots (pread), and packed
    for name, cache in (("q8_0", "50K"), ("mxfp4", "50K"), ("w-q4_k", "250K")):
        if name not in path: continue
        prompt = "The little dog ran to the park and"
        ref, e1 = greedy(path[name], prompt, {"DELTAFIN_STREAM": "0"})
        st, e2 = greedy(path[name], prompt, {"DELTAFIN_EXPERT_CACHE": cache}, ["--io", "pread"])
        ok = not e1 and not e2 and ref["tokens"] == st["tokens"]
        report(ok, f"{name} streamed experts (2 slots, pread) = resident",
               e1 or e2 or ("" if ok else f"{st['tokens']} vs {ref['tokens']}"))
        pk = os.path.join(tmp, name + "-packed.gguf")
        rc, _, err = run(["pack", path[name], pk])
        st, e2 = (None, f"pack: {last(err)}") if rc else greedy(pk, prompt, {"DELTAFIN_EXPERT_CACHE": cache}, ["--io", "pread"])
        ok = not e1 and not e2 and ref["tokens"] == st["tokens"]
        report(ok, f"{name} packed + streamed = resident", e1 or e2 or ("" if ok else f"{st['tokens']}"))
    # 5. info on a gpt-oss-120b-shaped file (2 layers, header + hole)
    big = os.path.join(tmp, "120b-shape.gguf")
    rc, _, err = run_dev(["gen-random", "--arch", "gpt-oss", "--preset", "gpt-oss-120b", "--n-layer", "2", "--sparse",
                          "--type", "q8_0", "--expert-type", "mxfp4", "--vocab", "bytes", big])
    if rc:
        report(False, "gpt-oss-120b-shaped sparse file", last(err))
    else:
        rc, out, err = run(["info", "-m", big])
        txt = out + err
        kv = re.search(r"KV cache per token \(F16\)\s+([0-9.]+) KiB", txt)
        ex = re.search(r"largest expert ([0-9.]+) MiB", txt)
        # 2 layers x (8 x 64) x 2 (K, V) x 2 B = 4 KiB; one expert 3 x 2880 x 2880 MXFP4 = 12.61 MiB
        ok = kv and abs(float(kv.group(1)) - 4.0) < 0.01 and ex and abs(float(ex.group(1)) - 12.61) < 0.01
        report(bool(ok), "info on a gpt-oss-120b-shaped file: KV 4 KiB/token (2 layers), expert 12.61 MiB",
               "" if ok else f"rc {rc}: {last(txt)}")
        os.unlink(big)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
print(f"gpt-oss: {C.n_pass} passed, {C.n_fail} failed")
sys.exit(1 if C.n_fail else 0)
PYEOF
