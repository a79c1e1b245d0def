#!/bin/sh
# test_kvq.sh — quantized KV caches (-ctk / -ctv, docs/kv_cache.md) against llama.cpp run with
# the same cache types (recorded by tests/data/expected/kvq/make.sh; no llama.cpp needed):
#   1. gen-random rebuilds the recorded models bit for bit (sha256)
#   2. greedy ids of `deltafin run --temp 0 -n 32 -ctk T -ctv T` = llama.cpp's with -ctk T -ctv T
#      (3 prompts, one longer than 64 tokens), for GQA (qwen3moe, llama, Mixtral-style, olmoe),
#      gpt-oss (sinks, sliding window), qwen3next's gated attention and deepseek2's MLA latent
#      and legacy heads; Q8_0, Q4_0 and a quantized K or V with the other F16. The rule of
#      test_e2e.sh: identical ids, or a first difference where llama.cpp was within NEAR_TIE.
#   3. the memory plan counts the types: `info -c 4096` KV bytes per token and at n_ctx are
#      F16's x 34/64 (Q8_0) and x 18/64 (Q4_0), and `run -v --mem-limit` plans that much less
#   4. refusals name the architecture: MLA with -ctk != -ctv, a block that does not divide a
#      head (16-wide llama heads); -fa off with a quantized V and an unknown type name (exit 2)
#   5. the config file (inference.cache_type_k / _v) gives llama.cpp's ids for those types;
#      `serve -ctk q4_0 -ctv q4_0` answers /completion with the text `run` prints with the flags
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$@" <<'PYEOF'
import hashlib, json, os, re, shutil, subprocess, sys, tempfile, time, urllib.request

BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
FIX = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
EXP = "tests/data/expected/kvq"
env = dict(os.environ, DELTAFIN_FIXTURES=FIX)
tmp = tempfile.mkdtemp(prefix="df_kvq_")
sys.path.insert(0, "tests/lib")
from dfcheck import Checker, NEAR_TIE
C = Checker("kvq", BIN, env)
report, run, run_dev, last, read_tsv, greedy = C.report, C.run, C.run_dev, C.last, C.read_tsv, C.greedy
srv = None

def kv_line(out, what):
    """bytes of info's 'KV cache per token' / 'KV cache at n_ctx' line (B, KiB, MiB, GiB)"""
    m = re.search(what + r".*?([0-9.]+) (B|KiB|MiB|GiB)\s*(\(|$)", out, re.M)
    if not m: return None
    return float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]

try:
    shutil.copy2(BIN, os.path.join(tmp, "deltafin"))  # a concurrent make may relink BIN
    BIN = C.bin = os.path.join(tmp, "deltafin")
    shutil.copy2(C.dev, os.path.join(tmp, "deltafin-dev"))
    C.dev = os.path.join(tmp, "deltafin-dev")
    models = read_tsv(f"{EXP}/models.tsv")
    rows = read_tsv(f"{C.recorded(EXP, ('greedy.tsv',))}/greedy.tsv")
    path, types = {}, {}
    # ---- 1. the recorded models ----
    for r in models:
        name, args = r["name"], r["gen_random_args"]
        f = os.path.join(tmp, name + ".gguf")
        rc, _, err = run_dev(["gen-random"] + args.replace("@FIX@", FIX).split() + [f])
        if rc != 0:
            report(False, f"{name} build", last(err)); continue
        sha = hashlib.sha256(open(f, "rb").read()).hexdigest()
        report(sha == r["sha256"], f"{name} rebuilt bit for bit", "" if sha == r["sha256"] else f"sha256 {sha}")
        path[name], types[name] = f, (r["ctk"], r["ctv"])
    # ---- 2. greedy ids with the recorded cache types ----
    for r in rows:
        name = r["name"]
        if name not in path: continue
        tk, tv = types[name]
        got, e = greedy(path[name], r["prompt"], extra=["-ctk", tk, "-ctv", tv])
        label = f"{name} -ctk {tk} -ctv {tv} greedy '{r['prompt'][:24]}'"
        if e:
            report(False, label, e); continue
        ok, msg = Checker.greedy_verdict(got, r, NEAR_TIE)
        report(ok, label, msg)
    # ---- 3. the plan counts the cache types ----
    q3 = path.get("qwen3moe-f16-q8_0")
    if q3:
        kv = {}
        for tk, tv in (("f16", "f16"), ("q8_0", "q8_0"), ("q4_0", "q4_0"), ("q8_0", "f16"), ("f32", "f32")):
            rc, out, err = run(["info", q3, "-c", "4096", "-ctk", tk, "-ctv", tv])
            kv[tk, tv] = (kv_line(out, "KV cache per token"), kv_line(out, "KV cache at n_ctx 4096")) if rc == 0 else (None, None)
            if rc != 0: report(False, f"info -ctk {tk} -ctv {tv}", last(err))
        f16 = kv["f16", "f16"][0]
        for (tk, tv), frac in ((("q8_0", "q8_0"), 34 / 64), (("q4_0", "q4_0"), 18 / 64), (("q8_0", "f16"), (34 / 64 + 1) / 2),
                               (("f32", "f32"), 1.0)):
            pt, at = kv[tk, tv]
            ok = f16 and pt is not None and abs(pt - f16 * frac) < 0.5 and at is not None and abs(at - 4096 * pt) / (4096 * pt) < 0.01
            report(ok, f"info -c 4096 -ctk {tk} -ctv {tv}: KV per token = F16's x {frac:.4f}",
                   f"{pt} B per token, {at} B at 4096 (F16: {f16} B per token)")
        # the plan run makes: KV of -c 4096 in the types, the rest unchanged
        plans = {}
        for t in ("f16", "q8_0"):
            rc, out, err = run(["run", "-m", q3, "-p", "Hi", "-n", "1", "--temp", "0", "-v", "-c", "4096", "--mem-limit", "1G",
                                "-ctk", t, "-ctv", t])
            m = re.search(r"of the plan's ([0-9.]+) MiB", out + err)
            plans[t] = float(m.group(1)) if m else None
        want = (kv["f16", "f16"][1] - kv["q8_0", "q8_0"][1]) / (1 << 20) if kv["q8_0", "q8_0"][1] else None
        ok = None not in plans.values() and want is not None and abs((plans["f16"] - plans["q8_0"]) - want) < 0.02
        report(ok, "run -v --mem-limit 1G -c 4096: the plan shrinks by the KV saved",
               f"plan {plans.get('f16')} MiB (f16) vs {plans.get('q8_0')} MiB (q8_0), KV saved {want} MiB")
    # ---- 4. refusals ----
    ds = path.get("deepseek2-v3-f32-q8_0")
    if ds:
        rc, out, err = run(["run", "-m", ds, "-p", "Hi", "-n", "1", "-ctk", "q8_0", "-ctv", "f16"])
        report(rc != 0 and "deepseek2" in err and "same" in err, "deepseek2 MLA refuses -ctk q8_0 -ctv f16", last(err))
        rc, out, err = run(["info", ds, "-ctk", "q4_0"])
        report(rc != 0 and "deepseek2" in err, "info refuses the same", last(err))
    ll = os.path.join(tmp, "llama16.gguf")
    rc, _, err = run_dev(["gen-random", "--arch", "llama", "--type", "f16", "--vocab", f"{FIX}/models/tok512.bin", ll])
    if rc == 0:
        rc, out, err = run(["run", "-m", ll, "-p", "Hi", "-n", "1", "-ctk", "q8_0", "-ctv", "q8_0"])
        report(rc != 0 and re.search(r"llama: K cache type q8_0 \(blocks of 32\) does not divide the key head size 16", err),
               "16-wide llama heads refuse q8_0", last(err))
        rc, out, err = run(["run", "-m", ll, "-p", "Hi", "-n", "1", "-ctk", "bf16", "-ctv", "f32"])
        report(rc == 0, "16-wide llama heads take bf16 / f32", last(err) if rc else "")
    rc, out, err = run(["run", "-m", q3 or "x.gguf", "-p", "Hi", "-fa", "off", "-ctv", "q8_0"])
    report(rc == 2 and "requires flash attention" in err, "-fa off -ctv q8_0 refused (llama.cpp's rule)", last(err))
    rc, out, err = run(["run", "-m", q3 or "x.gguf", "-p", "Hi", "-ctk", "q9_0"])
    report(rc == 2 and "q8_0" in err, "unknown type name: usage error listing the types", last(err))
    # ---- 5. config file and server ----
    q4 = path.get("qwen3moe-f16-q4_0")
    if q3 and q4:
        r0 = next(r for r in rows if r["name"] == "qwen3moe-f16-q8_0")
        r4 = next(r for r in rows if r["name"] == "qwen3moe-f16-q4_0")
        cfg = os.path.join(tmp, "kv.yaml")
        open(cfg, "w").write("inference:\n  cache_type_k: q4_0\n  cache_type_v: q4_0\n")
        a, e1 = greedy(q4, r4["prompt"], extra=["--config", cfg])
        c, e3 = greedy(q4, r4["prompt"])
        ok = not (e1 or e3) and a["tokens"] == [int(x) for x in r4["gen_ids"].split(",")] and a["tokens"] != c["tokens"]
        report(ok, "config inference.cache_type_k/_v: q4_0 gives llama.cpp's -ctk q4_0 -ctv q4_0 ids (not f16's)",
               e1 or e3 or "")
        open(cfg, "w").write("inference:\n  cache_type_k: q8_0\n  cache_type_v: q8_0\n")
        rc, out, err = run(["info", q3, "--config", cfg])
        report(rc == 0 and "(q8_0/q8_0)" in out, "info --config shows the types", last(err) if rc else "")
        bad = os.path.join(tmp, "bad.yaml")
        open(bad, "w").write("inference:\n  cache_type_k: q3\n")
        rc, out, err = run(["run", "-m", q3, "-p", "Hi", "--config", bad])
        report(rc != 0 and "bad.yaml:2" in err and "cache_type_k" in err, "config refuses a bad type with file:line", last(err))
        # serve -ctk q4_0 -ctv q4_0: /completion's text = run's with the same flags (not f16's)
        p = r4["prompt"]
        def run_text(extra):
            rc, out, err = run(["run", "-m", q4, "-p", p, "-n", "12", "--temp", "0", "--json"] + extra)
            return json.loads(out.strip().splitlines()[-1])["text"] if rc == 0 else None
        want_text, f16_text = run_text(["-ctk", "q4_0", "-ctv", "q4_0"]), run_text([])
        srv = subprocess.Popen([BIN, "serve", "-m", q4, "--port", "0", "-ctk", "q4_0", "-ctv", "q4_0", "-t", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        port = None
        t0 = time.time()
        while time.time() - t0 < 30 and port is None:
            line = srv.stdout.readline()
            if not line: break
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m: port = int(m.group(1))
        got_text = None
        if port:
            for _ in range(100):
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status == 200: break
                except Exception:
                    time.sleep(0.1)
            body = json.dumps({"prompt": p, "n_predict": 12, "temperature": 0}).encode()
            req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                got_text = json.loads(urllib.request.urlopen(req, timeout=60).read())["content"]
            except Exception as ex:
                got_text = f"error {ex}"
        report(want_text is not None and got_text == want_text and want_text != f16_text,
               "serve -ctk q4_0 -ctv q4_0: /completion = run's text with the flags (not f16's)",
               f"got {got_text!r} want {want_text!r} (f16 {f16_text!r})")
finally:
    if srv:
        srv.terminate()
        try: srv.wait(timeout=20)
        except Exception: srv.kill()
    shutil.rmtree(tmp, ignore_errors=True)
print(f"test_kvq: {'OK' if C.n_fail == 0 else 'FAILED'} ({C.n_pass} passed, {C.n_fail} failed)")
sys.exit(1 if C.n_fail else 0)
PYEOF
