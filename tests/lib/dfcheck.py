"""dfcheck.py — what the Python-driven end-to-end tests (test_deepseek2.sh, test_kimi_k3.sh)
share: PASS/FAIL reporting, running the deltafin binary (and deltafin-dev for gen-random),
recorded TSV tables, building the recorded models, greedy ids, perplexity, a server to ask and
GGUF tensor spans. Imported with sys.path.insert(0, "tests/lib")
from the repository root."""
import json, os, re, shutil, subprocess

# the developer tools (gen-random, convert-llama2c): $DELTAFIN_DEV_BIN, else build/deltafin-dev
DEV_BIN = os.environ.get("DELTAFIN_DEV_BIN") or os.path.abspath("build/deltafin-dev")
# the binary under test and the fixtures folder, as scripts/run_tests.sh sets them
BIN = os.environ.get("DELTAFIN_BIN") or os.path.abspath("build/deltafin")
FIXTURES = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")

# llama.cpp top-1 minus top-2 logit below which its greedy choice is a near-tie: decided by
# rounding, in either engine (the value test_e2e.sh and test_demo_model.sh use)
NEAR_TIE = 0.01


def kernel_isa(bin_path, env):
    """The kernel table deltafin picks on this CPU (honouring DELTAFIN_ISA in env): the
    `kernels:` line of `deltafin --version`."""
    p = subprocess.run([bin_path, "--version"], capture_output=True, env=env)
    m = re.search(r"^kernels: (\S+)", p.stdout.decode("utf-8", "replace"), re.M)
    return m.group(1) if m else "unknown"


def recorded(exp, names, bin_path, env):
    """The folder of llama.cpp recordings (the files `names`) that deltafin is compared with.
    llama.cpp's float orders depend on the ISA it was built for (-march=native): `exp/` holds
    recordings of an AVX-512 build, `exp/avx2/` those of an AVX2-only build
    (scripts/record_isa.py), and deltafin's avx512 and avx2 kernel tables follow the orders of
    the matching build (docs/testing.md "One set of recordings per ISA").
    By default the parity tests run deltafin's avx2 table on every x86 machine (DELTAFIN_ISA=avx2
    is set in env, which is changed in place) against `exp/avx2/` where it exists, else `exp/`
    (suites whose outputs do not depend on the vector width): the same comparison on AVX2 and
    AVX-512 machines, all of it re-recordable on either. DELTAFIN_PARITY_ISA=native runs the
    CPU's own table instead: avx512 against `exp/` (falling back to avx2 against `exp/avx2/`).
    Returns (folder, a line saying which)."""
    have = lambda d: all(os.path.exists(os.path.join(d, n)) for n in names)
    isa = kernel_isa(bin_path, env)
    sub = os.path.join(exp, "avx2")
    if isa in ("avx2", "avx512") and os.environ.get("DELTAFIN_PARITY_ISA", "avx2") != "native":
        forced = isa != "avx2"
        env["DELTAFIN_ISA"] = isa = "avx2"
    else:
        forced = False
    if isa == "avx512" and not have(exp) and have(sub):
        env["DELTAFIN_ISA"] = "avx2"
        return sub, f"recordings of an AVX2 llama.cpp ({sub}); running the avx2 kernels (none from AVX-512)"
    how = "avx2 kernels (DELTAFIN_ISA=avx2 on this AVX-512 CPU)" if forced else f"{isa} kernels"
    if isa == "avx2" and have(sub):
        return sub, f"recordings of an AVX2 llama.cpp ({sub}), {how}"
    return exp, f"recordings of an AVX-512 llama.cpp ({exp}), {how}"


class Checker:
    def __init__(self, label, bin_path, env, dev_path=DEV_BIN):
        self.label, self.bin, self.env, self.dev = label, bin_path, env, dev_path
        self.n_pass = self.n_fail = 0

    def build(self, tmp, name, args, fix):
        """gen-random ARGS (@FIX@ = fix), or "GEN-ARGS | quantize TYPE [OPTIONS]" (deltafin
        quantize of the F32 model) -> (path, None) or (None, error)."""
        f = os.path.join(tmp, name + ".gguf")
        args = args.replace("@FIX@", fix)
        if " | quantize " in args:
            g, q = args.split(" | quantize ")
            rc, _, err = self.run_dev(["gen-random"] + g.split() + [f + ".f32"])
            if rc == 0:
                rc, _, err = self.run(["quantize", f + ".f32", f] + q.split() + ["-t", "2"])
            if os.path.exists(f + ".f32"): os.unlink(f + ".f32")
        else:
            rc, _, err = self.run_dev(["gen-random"] + args.split() + [f])
        return (f, None) if rc == 0 else (None, self.last(err))

    def serve(self, model, args=(), wait_s=60):
        """`deltafin serve -m MODEL --port 0 ARGS` -> (process, base URL once /health is 200) or
        (process, None); stop it with Checker.stop."""
        import time, urllib.request
        p = subprocess.Popen([self.bin, "serve", "-m", model, "--port", "0", "-t", "2"] + list(args),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env, text=True)
        t0, url = time.time(), None
        while time.time() - t0 < wait_s and url is None:
            line = p.stdout.readline()
            if not line: break
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m: url = m.group(1)
        while url and time.time() - t0 < wait_s:
            try:
                if urllib.request.urlopen(url + "/health", timeout=5).status == 200: return p, url
            except Exception:
                time.sleep(0.1)
        return p, None

    @staticmethod
    def post(url, path, obj, timeout=120):
        """POST JSON obj to url + path -> the parsed answer, or {"error": text}"""
        import urllib.request
        req = urllib.request.Request(url + path, data=json.dumps(obj).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            return json.loads(urllib.request.urlopen(req, timeout=timeout).read())
        except Exception as ex:
            return {"error": str(ex)}

    @staticmethod
    def stop(proc):
        if proc:
            proc.terminate()
            try: proc.wait(timeout=20)
            except Exception: proc.kill()

    @staticmethod
    def gguf_spans(path, prefix, named=False):
        """(absolute offset, bytes) of every tensor whose name starts with prefix (GGUF v3 header);
        named: (name, exact bytes) instead."""
        import struct
        with open(path, "rb") as fh:
            d = fh.read(1 << 20)
        o = 4
        ver, nt, nkv = struct.unpack_from("<IQQ", d, o); o += 20
        def rstr(o):
            n, = struct.unpack_from("<Q", d, o); o += 8
            return d[o:o + n].decode(), o + n
        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
        def skip(t, o):
            if t == 8: return rstr(o)[1]
            if t == 9:
                at, n = struct.unpack_from("<IQ", d, o); o += 12
                for _ in range(n): o = skip(at, o)
                return o
            return o + sizes[t]
        align = 32
        for _ in range(nkv):
            k, o = rstr(o)
            t, = struct.unpack_from("<I", d, o); o += 4
            if k == "general.alignment": align = struct.unpack_from("<I", d, o)[0]
            o = skip(t, o)
        ts = []
        for _ in range(nt):
            name, o = rstr(o)
            nd, = struct.unpack_from("<I", d, o); o += 4
            ne = struct.unpack_from("<" + "Q" * nd, d, o); o += 8 * nd
            ty, off = struct.unpack_from("<IQ", d, o); o += 12
            ts.append((name, ty, ne, off))
        base = (o + align - 1) // align * align
        # byte sizes from the next tensor's offset (the file is written in offset order)
        offs = sorted(t[3] for t in ts) + [os.path.getsize(path) - base]
        out = []
        for name, ty, ne, off in ts:
            if not name.startswith(prefix): continue
            if named:
                n = 1
                for x in ne: n *= x
                out.append((name, n * 4 if ty == 0 else None))
                continue
            nxt = min(x for x in offs if x > off)
            out.append((base + off, nxt - off))
        return out

    def report(self, ok, name, msg=""):
        if ok: self.n_pass += 1
        else: self.n_fail += 1
        print(f"{self.label}: {'PASS' if ok else 'FAIL'} {name}{': ' + msg if msg else ''}", flush=True)

    def run(self, args, extra_env=None, timeout=600, dev=False):
        """deltafin ARGS (deltafin-dev ARGS with dev=True) -> (exit status, stdout, stderr)"""
        e = dict(self.env, **(extra_env or {}))
        try:
            p = subprocess.run([self.dev if dev else self.bin] + args, capture_output=True, env=e, timeout=timeout)
            return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            return 124, "", "timeout"

    def private_copies(self, folder):
        """run copies of deltafin and deltafin-dev in folder: a concurrent make may relink the
        originals while the test runs"""
        for attr, name in (("bin", "deltafin"), ("dev", "deltafin-dev")):
            path = os.path.join(folder, name)
            shutil.copy2(getattr(self, attr), path)
            setattr(self, attr, path)

    def run_dev(self, args, extra_env=None, timeout=600):
        return self.run(args, extra_env, timeout, dev=True)

    @staticmethod
    def last(err):
        l = [x for x in err.strip().splitlines() if x.strip()]
        return l[-1] if l else "(no message)"

    @staticmethod
    def read_tsv(path):
        with open(path, encoding="utf-8") as f:
            rows = [l.rstrip("\n").split("\t") for l in f if l.strip()]
        return [dict(zip(rows[0], r)) for r in rows[1:]]

    def greedy(self, model, prompt, extra_env=None, extra=()):
        """`deltafin run --temp 0 -n 32 --json`: (parsed JSON, None) or (None, error)."""
        rc, out, err = self.run(["run", "-m", model, "-p", prompt, "-n", "32", "--temp", "0", "-t", "2", "--json"]
                                + list(extra), extra_env)
        if rc != 0:
            return None, f"exit {rc}: {self.last(err)}"
        for line in reversed(out.strip().splitlines()):
            try:
                return json.loads(line), None
            except ValueError:
                pass
        return None, "no JSON"

    def recorded(self, exp, names=("greedy.tsv", "ppl.tsv")):
        """dfcheck.recorded for this checker's binary and environment; prints which recordings."""
        d, why = recorded(exp, names, self.bin, self.env)
        print(f"{self.label}: {why}", flush=True)
        return d

    def check_greedy(self, name, row, got):
        """Reports deltafin's greedy run (parsed JSON) against a recorded row: by greedy_verdict
        where the row has llama.cpp's per-step gaps, else every id must be identical."""
        if row.get("gaps"):
            ok, msg = self.greedy_verdict(got, row)
        else:
            want_p = [int(x) for x in row["prompt_ids"].split(",") if x]
            want_g = [int(x) for x in row["gen_ids"].split(",") if x]
            ok = got["prompt_tokens"] == want_p and got["tokens"] == want_g
            same = next((i for i, (a, b) in enumerate(zip(got["tokens"], want_g)) if a != b), len(want_g))
            msg = f"{len(want_g)} ids identical" if ok else \
                f"first difference at step {same}: got {got['tokens']} want {want_g}"
        self.report(ok, f"{name} greedy '{row['prompt']}'", msg)
        return ok

    @staticmethod
    def greedy_verdict(got, row, near_tie=NEAR_TIE):
        """deltafin's greedy run (parsed JSON) against a recorded llama.cpp row (prompt_ids,
        gen_ids, gaps = llama.cpp's per-step top-1 minus top-2 logit): (ok, message). The ids must
        be identical, except that a first difference at a step where llama.cpp's own gap is below
        near_tie passes (the steps after it are not compared)."""
        want_p = [int(x) for x in row["prompt_ids"].split(",") if x]
        want_g = [int(x) for x in row["gen_ids"].split(",") if x]
        gaps = [float(x) for x in row["gaps"].split(",") if x]
        if got["prompt_tokens"] != want_p:
            return False, f"prompt ids differ: got {got['prompt_tokens']} want {want_p}"
        g = got["tokens"]
        n = len(want_g)
        i = next((k for k in range(max(len(g), n)) if k >= len(g) or k >= n or g[k] != want_g[k]), None)
        if i is None:
            return True, f"{n}/{n} ids identical"
        gap = gaps[i] if i < len(gaps) else None
        a = g[i] if i < len(g) else "end"
        b = want_g[i] if i < n else "end"
        where = f"{i}/{n} ids identical, then deltafin {a} vs llama.cpp {b} where llama.cpp's gap is " + \
                (f"{gap:.4f}" if gap is not None else "unknown")
        if gap is not None and gap < near_tie:
            return True, where + f" (a near-tie, < {near_tie})"
        return False, where

    def check_ppls(self, rows, path, tol=0.005):
        """Reports `deltafin perplexity` (ppl below) of every recorded row (name, ppl) whose model
        is in path (name -> file) against llama-perplexity's value: within tol (relative)."""
        for r in rows:
            name, want = r["name"], float(r["ppl"])
            if name not in path: continue
            p, e = self.ppl(path[name])
            if e:
                self.report(False, f"{name} perplexity", e); continue
            rel = abs(p - want) / want
            self.report(rel <= tol, f"{name} perplexity", f"{p:.4f} vs llama.cpp {want:.4f} ({100*rel:.3f}%)")

    def ppl(self, model, extra_env=None):
        """`deltafin perplexity -c 128 -b 32` on tests/data/ppl_story.txt: (PPL, None) or (None, error)."""
        rc, out, err = self.run(["perplexity", "-m", model, "-f", "tests/data/ppl_story.txt", "-c", "128", "-b", "32",
                                 "-t", "2"], extra_env)
        m = re.findall(r"PPL\s*=\s*([0-9.eE+-]+)", out + "\n" + err)
        return (float(m[-1]) if m else None), (None if m else f"exit {rc}: {self.last(err)}")
