#!/bin/sh
# df_dump_build.sh — a private debug build of deltafin that writes intermediate activations, for
# bisecting a difference from llama.cpp op by op (docs/testing.md, "Quantized parity").
#   sh scripts/df_dump_build.sh [OUTDIR=/tmp/df_dump]    -> OUTDIR/df_dump (df_logits.c's CLI)
#   DBG_DIR=dir DBG_STEP=k OUTDIR/df_dump MODEL IDS N_PROMPT /dev/null
# writes dir/NAME-LAYER.f32 at decode call k (attn_norm, Qcur, fa, kqv_out, ffn_inp, ffn_norm,
# ffn_gate, ffn_swiglu, ffn_moe_out, ffn_out, l_out, result_norm, result_output; MLA and dense
# FFN paths), to compare with `llama_oracle --dump` and scripts/q8_flips.py. Patches a copy of
# src/ (never the tree); needs build/libdeltafin.a. A patch that no longer applies fails loudly.
set -eu
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/df_dump}
rm -rf "$OUT" && mkdir -p "$OUT"
cp -r src include "$OUT/" && cp build/libdeltafin.a "$OUT/lib.a"
cat > "$OUT/src/dbgdump.h" <<'H'
#include <stdio.h>
#include <stdlib.h>
extern int g_dbg_step;
static inline void dbg_dump(const char *name, int il, const float *p, long n) {
    const char *dir = getenv("DBG_DIR"), *ws = getenv("DBG_STEP");
    if (!dir || !ws || atoi(ws) != g_dbg_step) return;
    char path[512];
    if (il >= 0) snprintf(path, sizeof path, "%s/%s-%d.f32", dir, name, il);
    else snprintf(path, sizeof path, "%s/%s.f32", dir, name);
    FILE *f = fopen(path, "wb");
    if (f) { fwrite(p, 4, (size_t)n, f); fclose(f); }
}
H
cd "$OUT"
/usr/bin/python3 - <<'PY'
def patch(p, pairs):
    s=open(p).read()
    for a,b in pairs:
        assert a in s, (p,a)
        s=s.replace(a,b,1)
    open(p,'w').write(s)
patch('src/forward/attn_mla.c',[
('#include "quant.h"\n','#include "quant.h"\n#include "dbgdump.h"\n'),
("""    /* queries */""","""    dbg_dump("attn_norm", il, x, (long)nt * D);
    /* queries */"""),
("""        mmw(c, L->wq_b, b.qa, rq, nt, b.q, nq);""","""        dbg_dump("qa_norm", il, b.qa, (long)nt * rq);
        mmw(c, L->wq_b, b.qa, rq, nt, b.q, nq);"""),
("""    df_attn_args a = {""","""    dbg_dump("q", il, b.q, (long)nt * nq);
    dbg_dump("kvn", il, b.kv, (long)nt * nkv);
    df_attn_args a = {"""),
("""        df_attn_gqa(c->pool, &a);
        for (int h = 0; h < nh; h++)""","""        dbg_dump("Qcur", il, b.qf, (long)nt * nqf);
        df_attn_gqa(c->pool, &a);
        dbg_dump("fa", il, b.o, (long)nt * nh * rkv);
        for (int h = 0; h < nh; h++)"""),
("""    mmw(c, L->wo, b.ov, (int64_t)nh * dv, nt, out, D);""","""    dbg_dump("kqv_out", il, b.ov, (long)nt * nh * dv);
    mmw(c, L->wo, b.ov, (int64_t)nh * dv, nt, out, D);"""),
])
patch('src/forward/session.c',[
('#include "session.h"\n','#include "session.h"\n#include "dbgdump.h"\nint g_dbg_step = -1;\n'),
("""    if (L->is_moe) {
        int rc = df_moe_forward(c, il, c->x, nt, c->y);""","""    dbg_dump("ffn_inp", il, c->h, (long)nt * D);
    dbg_dump("ffn_norm", il, c->x, (long)nt * D);
    if (L->is_moe) {
        int rc = df_moe_forward(c, il, c->x, nt, c->y);"""),
("""        df_swiglu(c->fa, c->fb, (int)(nt * ff));
        mm(c, L->ffn_down, c->fa, ff, nt, c->y, D);""","""        dbg_dump("ffn_gate", il, c->fa, (long)nt * ff);
        df_swiglu(c->fa, c->fb, (int)(nt * ff));
        dbg_dump("ffn_swiglu", il, c->fa, (long)nt * ff);
        mm(c, L->ffn_down, c->fa, ff, nt, c->y, D);"""),
("""    for (int64_t i = 0; i < (int64_t)nt * D; i++) c->h[i] += c->y[i];
    return DF_OK;
}

/* One step""","""    dbg_dump("ffn_out", il, c->y, (long)nt * D);
    for (int64_t i = 0; i < (int64_t)nt * D; i++) c->h[i] += c->y[i];
    dbg_dump("l_out", il, c->h, (long)nt * D);
    return DF_OK;
}

/* One step"""),
("""    mm(c, m->output, c->x, D, n_out, dst, hp->n_vocab);
    return DF_OK;""","""    dbg_dump("result_norm", -1, c->x, (long)n_out * D);
    mm(c, m->output, c->x, D, n_out, dst, hp->n_vocab);
    dbg_dump("result_output", -1, dst, (long)n_out * hp->n_vocab);
    return DF_OK;"""),
("""int deltafin_decode(deltafin_ctx *c, const int32_t *ids, int n, bool all_logits) {
""","""int deltafin_decode(deltafin_ctx *c, const int32_t *ids, int n, bool all_logits) {
    g_dbg_step++;
"""),
])
patch('src/forward/moe.c',[
('#include <math.h>\n','#include <math.h>\n#include "dbgdump.h"\n'),
("""    /* shared expert */
    if (L->gate_shexp) {""","""    dbg_dump("ffn_moe_out", il, out, (long)nt * D);
    /* shared expert */
    if (L->gate_shexp) {"""),
])
PY
F="-std=c11 -D_GNU_SOURCE -O2 -Iinclude -Isrc -pthread"
L="-lpcre2-8 -lmicrohttpd -lcjson -lxxhash -lyaml -lcurl -lcrypto -lm -lpthread"
[ -f /usr/include/liburing.h ] && { F="$F -DDF_HAVE_URING=1"; L="$L -luring"; }
for f in attn_mla session moe; do gcc $F -c src/forward/$f.c -o $f.o; done
# shellcheck disable=SC2086
gcc $F -o df_dump "$OLDPWD/scripts/df_logits.c" attn_mla.o session.o moe.o lib.a $L
echo "$OUT/df_dump" >&2
