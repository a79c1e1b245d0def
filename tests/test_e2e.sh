#!/bin/sh
# test_e2e.sh — end-to-end checks of `deltafin` against outputs recorded from reference
# engines (how they were made: docs/testing.md, scripts/make_expected.sh). No llama.cpp needed.
#   1. `deltafin-dev convert-llama2c` stories260K + `deltafin run --temp 0` = llama2.c run.c's
#      text and ids
#   2. `deltafin-dev gen-random` rebuilds the recorded random models bit for bit (sha256)
#   3. greedy ids of `deltafin run --json --temp 0 -n 32` = llama.cpp's, for 5 archs x 3 types,
#      and Q4_K / MXFP4-expert models (qwen3moe, Mixtral-style) made by `deltafin quantize`
#      (tensor data = llama-quantize's --pure Q4_K / MXFP4_MOE, checked when recorded)
#   4. `deltafin perplexity -c 128 -b 32` within 0.5% of llama-perplexity (same options)
#   5. llama-2-tiny-random.gguf loads and generates (ids compared before the first near-tie)
# Prints one PASS/FAIL/NOTE line per check and a summary; exit 1 if anything failed.
# E2E_ONLY=regex restricts to checks whose name matches (e.g. E2E_ONLY=qwen3moe).
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
exec "$PY" - "$@" <<'PYEOF'
import hashlib, json, os, re, shutil, subprocess, sys, tempfile

BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
DEV = os.environ.get("DELTAFIN_DEV_BIN") or os.path.abspath("build/deltafin-dev")  # gen-random, convert-llama2c
FIX = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
EXP = "tests/data/expected"
ONLY = os.environ.get("E2E_ONLY")
sys.path.insert(0, "tests/lib")
from dfcheck import Checker, NEAR_TIE, recorded  # NEAR_TIE: llama.cpp top-1 minus top-2 below which a divergence is a tie
PPL_TOL = 0.005      # relative
TIMEOUT = 600
env = dict(os.environ, DELTAFIN_FIXTURES=FIX)
tmp = tempfile.mkdtemp(prefix="df_e2e_")
n_pass = n_fail = n_note = 0

def report(kind, name, msg=""):
    global n_pass, n_fail, n_note
    if kind == "PASS": n_pass += 1
    elif kind == "FAIL": n_fail += 1
    else: n_note += 1
    print(f"e2e: {kind} {name}{': ' + msg if msg else ''}", flush=True)

def want(name):
    return not ONLY or re.search(ONLY, name)

def run(args, timeout=TIMEOUT, dev=False):
    try:
        p = subprocess.run([DEV if dev else BIN] + args, capture_output=True, env=env, timeout=timeout)
        return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout}s"
    except OSError as e:
        return 127, "", str(e)

def why(rc, err):
    lines = [l for l in err.strip().splitlines() if l.strip()]
    return f"exit {rc}: {lines[-1] if lines else '(no message)'}"

def run_json(model, prompt, n):
    rc, out, err = run(["run", "-m", model, "-p", prompt, "-n", str(n), "--temp", "0", "--json"])
    if rc != 0:
        return None, why(rc, err)
    for line in reversed(out.strip().splitlines()):
        try:
            return json.loads(line), None
        except ValueError:
            continue
    return None, "no JSON object in the output of `deltafin run --json`"

def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    head = rows[0]
    return [dict(zip(head, r)) for r in rows[1:]]

def ids(s):
    return [int(x) for x in s.split(",") if x != ""]

def compare_greedy(name, row, got):
    """Identical greedy ids, except after a step where llama.cpp itself was within NEAR_TIE of a
    tie (tests/lib/dfcheck.py greedy_verdict); such a pass is reported as a NOTE."""
    ok, msg = Checker.greedy_verdict(got, row, NEAR_TIE)
    report("FAIL" if not ok else "NOTE" if "near-tie" in msg else "PASS", name, msg)

def parse_ppl(out, err):
    for text in (out, err):
        for line in reversed(text.strip().splitlines()):
            try:
                o = json.loads(line)
                for k in ("ppl", "perplexity", "PPL"):
                    if isinstance(o, dict) and k in o:
                        return float(o[k])
            except ValueError:
                pass
    m = re.findall(r"PPL\s*[=:]\s*([0-9.eE+-]+)", out + "\n" + err, re.I)
    return float(m[-1]) if m else None

try:
    for b in (BIN, DEV):
        if not os.access(b, os.X_OK):
            report("FAIL", "setup", f"{b} not found (build first)")
            raise SystemExit
    # private copies: a concurrent `make` may replace the binaries while the test runs
    shutil.copy2(BIN, os.path.join(tmp, "deltafin"))
    BIN = os.path.join(tmp, "deltafin")
    shutil.copy2(DEV, os.path.join(tmp, "deltafin-dev"))
    DEV = os.path.join(tmp, "deltafin-dev")

    # ---- 1. llama2.c stories260K -------------------------------------------------------------
    s260 = os.path.join(tmp, "stories260K.gguf")
    if want("stories260K"):
        rc, out, err = run(["convert-llama2c", f"{FIX}/models/stories260K.bin",
                            f"{FIX}/models/tok512.bin", s260], dev=True)
        if rc != 0:
            report("FAIL", "convert-llama2c stories260K", why(rc, err))
        else:
            report("PASS", "convert-llama2c stories260K")
            # run.c: 256 steps from BOS, prints each token after BOS, strips the space the first
            # piece starts with, stops early only at BOS (id 1), then prints "\n"
            got, e = run_json(s260, "", 256)
            if e:
                report("FAIL", "stories260K greedy vs llama2.c run.c", e)
            else:
                want_ids = ids(open(f"{EXP}/stories260K_t0.ids").read().strip().replace(" ", ","))
                want_txt = open(f"{EXP}/stories260K_t0.txt", encoding="utf-8").read()
                toks = got["tokens"]
                if 1 in toks:
                    toks = toks[:toks.index(1)]
                txt = got["text"]
                txt = txt[1:] if txt.startswith(" ") else txt
                if toks != want_ids:
                    i = next((k for k in range(min(len(toks), len(want_ids))) if toks[k] != want_ids[k]),
                             min(len(toks), len(want_ids)))
                    report("FAIL", "stories260K greedy ids vs llama2.c run.c",
                           f"first difference at step {i} of {len(want_ids)} (got {len(toks)} ids)")
                else:
                    report("PASS", "stories260K greedy ids vs llama2.c run.c", f"{len(toks)} ids")
                if txt.rstrip("\n") != want_txt.rstrip("\n"):
                    report("FAIL", "stories260K text vs llama2.c run.c",
                           f"got {txt[:60]!r}... want {want_txt[:60]!r}...")
                else:
                    report("PASS", "stories260K text vs llama2.c run.c")

    # ---- 1b. bad input: clear error, exit status 1 (2 for bad options), no output file --------
    if want("bad input"):
        good_bin, good_tok = f"{FIX}/models/stories260K.bin", f"{FIX}/models/tok512.bin"
        def cut(src, n, name):
            dst = os.path.join(tmp, name)
            with open(src, "rb") as f, open(dst, "wb") as g:
                g.write(f.read(n))
            return dst
        bad_out = os.path.join(tmp, "bad.gguf")
        cases = [
            ("convert-llama2c truncated checkpoint", ["convert-llama2c", cut(good_bin, 100000, "t.bin"), good_tok, bad_out], 1, "bytes"),
            ("convert-llama2c not a checkpoint", ["convert-llama2c", good_tok, good_tok, bad_out], 1, "config"),
            ("convert-llama2c truncated tokenizer", ["convert-llama2c", good_bin, cut(good_tok, 3000, "tk.bin"), bad_out], 1, "tokens"),
            ("convert-llama2c missing file", ["convert-llama2c", good_bin, os.path.join(tmp, "nope.bin"), bad_out], 1, "nope.bin"),
            ("gen-random bad arch", ["gen-random", "--arch", "nope", bad_out], 2, "arch"),
            ("gen-random q8_0 row not a multiple of 32", ["gen-random", "--arch", "llama", "--type", "q8_0", "--n-embd", "48", bad_out], 1, "multiple of 32"),
            ("gen-random inconsistent heads", ["gen-random", "--arch", "llama", "--n-head", "4", "--n-head-kv", "3", bad_out], 2, "n-head"),
        ]
        for name, args, want_rc, needle in cases:  # all deltafin-dev commands
            rc, out, err = run(args, dev=True)
            if rc != want_rc or needle not in err or os.path.exists(bad_out) or os.path.exists(bad_out + ".tmp"):
                report("FAIL", f"bad input: {name}", f"exit {rc} (want {want_rc}), stderr {err.strip()[-120:]!r}")
            else:
                report("PASS", f"bad input: {name}")

    # ---- 2-4. random models vs llama.cpp ------------------------------------------------------
    models = read_tsv(f"{EXP}/random_models.tsv")
    REC, rec_why = recorded(EXP, ("random_greedy.tsv", "random_ppl.tsv", "tiny_random_greedy.tsv"), BIN, env)
    print(f"e2e: {rec_why}", flush=True)
    greedy = read_tsv(f"{REC}/random_greedy.tsv")
    ppl_rows = read_tsv(f"{REC}/random_ppl.tsv")
    ppls = {r["name"]: float(r["ppl"]) for r in ppl_rows}
    for m in models:
        name = m["name"]
        if not want(name):
            continue
        path = os.path.join(tmp, name + ".gguf")
        args = m["gen_random_args"].replace("@FIX@", FIX)
        if " | quantize " in args:  # F32 from gen-random, then `deltafin quantize`
            g, q = args.split(" | quantize ")
            rc, out, err = run(["gen-random"] + g.split() + [path + ".f32"], dev=True)
            if rc == 0:
                rc, out, err = run(["quantize", path + ".f32", path] + q.split() + ["-t", "2"])
            if os.path.exists(path + ".f32"):
                os.unlink(path + ".f32")
        else:
            rc, out, err = run(["gen-random"] + args.split() + [path], dev=True)
        if rc != 0:
            report("FAIL", f"{name} gen-random", why(rc, err))
            continue
        sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
        if sha != m["sha256"]:
            report("FAIL", f"{name} gen-random", "file differs from the one llama.cpp was run on "
                   "(generator not bit-identical on this machine?) — comparisons below are void")
            continue
        report("PASS", f"{name} gen-random", "bit-identical")
        for i, row in enumerate(r for r in greedy if r["name"] == name):
            got, e = run_json(path, row["prompt"], 32)
            if e:
                report("FAIL", f"{name} greedy #{i}", e)
            else:
                compare_greedy(f"{name} greedy #{i}", row, got)
        rc, out, err = run(["perplexity", "-m", path, "-f", "tests/data/ppl_story.txt", "-c", "128", "-b", "32"])
        if rc != 0:
            report("FAIL", f"{name} perplexity", why(rc, err))
        else:
            p = parse_ppl(out, err)
            ref = ppls[name]
            tol, tmsg = PPL_TOL, ""
            if p is None:
                report("FAIL", f"{name} perplexity", "no PPL value in the output")
            elif abs(p - ref) / ref > tol:
                report("FAIL", f"{name} perplexity", f"{p:.4f} vs llama.cpp {ref:.4f} ({(p / ref - 1) * 100:+.3f}%{tmsg})")
            else:
                report("PASS", f"{name} perplexity", f"{p:.4f} vs llama.cpp {ref:.4f} ({(p / ref - 1) * 100:+.3f}%{tmsg})")
            os.unlink(path)

    # ---- 5. llama-2-tiny-random ----------------------------------------------------------------
    tiny = f"{FIX}/models/llama-2-tiny-random.gguf"
    for i, row in enumerate(read_tsv(f"{REC}/tiny_random_greedy.tsv")):
        name = f"llama-2-tiny-random greedy #{i}"
        if not want(name):
            continue
        got, e = run_json(tiny, row["prompt"], 32)
        if e:
            report("FAIL", name, e)
        elif not got["tokens"]:
            report("FAIL", name, "generated nothing")
        else:
            compare_greedy(name, row, got)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"test_e2e: {n_pass} passed, {n_fail} failed, {n_note} near-tie notes", flush=True)
    sys.exit(1 if n_fail else 0)
PYEOF
