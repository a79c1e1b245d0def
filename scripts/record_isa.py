#!/usr/bin/env python3
"""record_isa.py — record llama.cpp's greedy ids and perplexities of an existing test suite's
models with the llama.cpp build of THIS machine's ISA, next to the recordings of another ISA.

Why: llama.cpp's float summation orders depend on the vector width it was compiled for
(-march=native: GGML_F32_EPR 16 with AVX-512, 8 with AVX2; its repacked-weight and tinyBLAS
kernels too), so its outputs on random models (near-uniform distributions) differ between an
AVX-512 and an AVX2 machine. deltafin's avx512 and avx2 kernel tables follow the orders of the
matching build; the tests compare each with the recordings of its own ISA (tests/lib/dfcheck.py
`recorded`). The suite's root folder holds the AVX-512 recordings; this script writes the others
into SUITE/<isa>/ (e.g. tests/data/expected/deepseek2/avx2/).

The models are the suite's own (models.tsv: gen-random arguments, possibly "| quantize ..."):
they are rebuilt, checked against the recorded sha256 (and, for quantized ones, against
llama-quantize by scripts/record_lib.sh build_model), and nothing is chosen: no seed search, no
look at deltafin's output. Greedy rows gain llama.cpp's per-step top-1 minus top-2 gaps, so the
tests apply the near-tie rule where this ISA's llama.cpp has a near-tie.

usage: scripts/record_isa.py SUITE [--llama DIR] [--only REGEX]
  SUITE  e2e (tests/data/expected/random_*.tsv + tiny_random_greedy.tsv) or the name of a folder
         tests/data/expected/SUITE with models.tsv, greedy.tsv and ppl.tsv
  --llama  llama.cpp checkout built in DIR/build/bin (default /work/llama.cpp; kimi_k3 needs a
           build with kimi-k3, default /work/llama-k3)
  --only   record only the models whose name matches; the other rows of an existing output stay
Needs build/deltafin, build/deltafin-dev, build/tests/test_quant (make) and python3.
"""
import argparse, hashlib, os, re, shutil, subprocess, sys, tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
N_PREDICT = 32


def sh(cmd, env=None, check=True):
    p = subprocess.run(cmd, capture_output=True, env=env, stdin=subprocess.DEVNULL)
    if check and p.returncode:
        sys.exit(f"record_isa: {' '.join(cmd[:3])} ...: exit {p.returncode}: {p.stderr.decode()[-400:]}")
    return p.stdout.decode("utf-8", "replace")


def read_tsv(path):
    with open(path, encoding="utf-8") as f:
        rows = [l.rstrip("\n").split("\t") for l in f if l.strip()]
    return [dict(zip(rows[0], r)) for r in rows[1:]]


def write_tsv(path, head, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(head) + "\n")
        for r in rows:
            f.write("\t".join(r.get(h, "") for h in head) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("--llama")
    ap.add_argument("--only", default=".*")
    a = ap.parse_args()
    os.chdir(ROOT)
    llama = a.llama or ("/work/llama-k3" if a.suite == "kimi_k3" else "/work/llama.cpp")
    libdir = os.path.join(llama, "build/bin")
    fix = os.environ.get("DELTAFIN_FIXTURES") or os.path.abspath("../shared/fixtures")
    if a.suite == "e2e":
        exp, f_models, f_greedy, f_ppl = "tests/data/expected", "random_models.tsv", "random_greedy.tsv", "random_ppl.tsv"
    else:
        exp, f_models, f_greedy, f_ppl = f"tests/data/expected/{a.suite}", "models.tsv", "greedy.tsv", "ppl.tsv"
    tmp = tempfile.mkdtemp(prefix="df_record_isa_")
    try:
        df, dfdev, hashbin = (os.path.join(tmp, n) for n in ("deltafin", "deltafin-dev", "test_quant"))
        for src, dst in (("build/deltafin", df), ("build/deltafin-dev", dfdev), ("build/tests/test_quant", hashbin)):
            shutil.copy2(src, dst)  # a concurrent make may relink the originals
        m = re.search(r"^kernels: (\S+)", sh([df, "--version"]), re.M)
        isa = m.group(1) if m else "unknown"
        if isa not in ("avx2", "avx512"):
            sys.exit(f"record_isa: deltafin's kernels here are '{isa}': record on an AVX2 or AVX-512 machine")
        out = exp if isa == "avx512" else os.path.join(exp, isa)
        os.makedirs(out, exist_ok=True)
        oracle = os.path.join(tmp, "oracle")
        libs = ["-lllama", "-lggml-base"] + (["-lggml"] if os.path.exists(os.path.join(libdir, "libggml.so")) else [])
        sh(["gcc", "-O2", "-o", oracle, "scripts/llama_oracle.c", f"-I{llama}/include", f"-I{llama}/ggml/include",
            f"-L{libdir}"] + libs + [f"-Wl,-rpath,{libdir}", "-lm"])
        # llama.cpp's logger writes from a thread that exit() does not wait for, so the last lines
        # (llama-perplexity's "Final estimate") are often lost on a loaded machine: a preloaded
        # destructor gives it a moment before the process ends
        shim = os.path.join(tmp, "slow_exit.so")
        with open(shim + ".c", "w") as f:
            f.write("#include <unistd.h>\n__attribute__((destructor)) static void slow_exit(void) { usleep(500000); }\n")
        sh(["gcc", "-shared", "-fPIC", "-o", shim, shim + ".c"])
        commit = sh(["git", "-C", llama, "rev-parse", "--short=12", "HEAD"], check=False).strip() or "?"
        env = dict(os.environ, DF=df, DFDEV=dfdev, FIX=fix, HASH=hashbin, DELTAFIN_FIXTURES=fix,
                   LQ_BIN=os.path.join(libdir, "llama-quantize"), PPL_BIN=os.path.join(libdir, "llama-perplexity"))
        only = re.compile(a.only)
        models = [r for r in read_tsv(os.path.join(exp, f_models)) if only.search(r["name"])]
        greedy_in = read_tsv(os.path.join(exp, f_greedy))
        ppl_names = {r["name"] for r in read_tsv(os.path.join(exp, f_ppl))}
        g_rows, p_rows = [], []

        def greedy_rows_for(name, path, prompts):
            for prompt in prompts:
                o = sh([oracle, path, prompt, str(N_PREDICT)]).strip().split("\t")
                # prompt_ids, gen_ids, min_gap, min_gap_step, gaps
                g_rows.append({"name": name, "prompt": prompt, "prompt_ids": o[0], "gen_ids": o[1],
                               "min_gap": o[2], "gaps": o[4] if len(o) > 4 else ""})

        for r in models:
            name = r["name"]
            path = os.path.join(tmp, name + ".gguf")
            sh(["sh", "-c", '. scripts/record_lib.sh; build_model "$0" "$1" "$2"', name, r["gen_random_args"], path],
               env=env)
            sha = hashlib.sha256(open(path, "rb").read()).hexdigest()
            if sha != r["sha256"]:
                sys.exit(f"record_isa: {name}: rebuilt file differs from the recorded one (sha {sha})")
            greedy_rows_for(name, path, [g["prompt"] for g in greedy_in if g["name"] == name])
            if name in ppl_names:
                for _ in range(20):  # llama.cpp's asynchronous logger sometimes loses the last line
                    p = subprocess.run([env["PPL_BIN"], "-m", path, "-f", "tests/data/ppl_story.txt", "-c", "128",
                                        "-t", "2", "-b", "32"], capture_output=True, stdin=subprocess.DEVNULL,
                                       env=dict(env, LD_PRELOAD=shim))
                    mm = re.search(r"Final estimate: PPL = ([0-9.]+)", (p.stdout + p.stderr).decode("utf-8", "replace"))
                    if mm:
                        p_rows.append({"name": name, "ppl": mm.group(1)})
                        break
                else:
                    sys.exit(f"record_isa: llama-perplexity failed on {name}")
            os.unlink(path)
            print(f"record_isa: {a.suite}/{name} recorded ({isa}, llama.cpp {commit})", file=sys.stderr)
        if a.suite == "e2e" and only.search("llama-2-tiny-random"):
            tiny = [g["prompt"] for g in read_tsv(os.path.join(exp, "tiny_random_greedy.tsv"))]
            n0 = len(g_rows)
            greedy_rows_for("llama-2-tiny-random", f"{fix}/models/llama-2-tiny-random.gguf", tiny)
            tiny_rows, g_rows[n0:] = g_rows[n0:], []
            write_tsv(os.path.join(out, "tiny_random_greedy.tsv"),
                      ["name", "prompt", "prompt_ids", "gen_ids", "min_gap", "gaps"], tiny_rows)

        def merge(fname, head, new):
            """keep the rows of models not recorded now (--only), replace the others"""
            f = os.path.join(out, fname)
            names = {r["name"] for r in models}
            old = [r for r in read_tsv(f) if r["name"] not in names] if os.path.exists(f) else []
            write_tsv(f, head, old + new)

        merge(f_greedy, ["name", "prompt", "prompt_ids", "gen_ids", "min_gap", "gaps"], g_rows)
        merge(f_ppl, ["name", "ppl"], p_rows)
        with open(os.path.join(out, "RECORDED"), "w") as f:
            f.write(f"llama.cpp {commit} built with -DGGML_NATIVE=ON on an {isa.upper()} CPU "
                    f"({cpu_name()}); scripts/record_isa.py {a.suite}\n")
        print(f"record_isa: written to {out}", file=sys.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cpu_name():
    try:
        return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        return "?"


if __name__ == "__main__":
    main()
