/* plan.c — the memory plan (see plan.h): three decisions in order, each on the footprint
 * alone. 1. Routed experts stream when everything together does not fit (or when asked).
 * 2. Dense layers: as many resident as leave room for a working set of expert slots; the rest
 *    stream through two buffers (one when two do not fit); the token embedding table, when
 *    experts stream and it is worth a slot, is read by row instead of held. 3. The expert cache
 *    gets what is left, in slots of the largest expert. */
#include "runtime/plan.h"

static uint64_t slots_cost(uint64_t slot, int n) { return slot * (uint64_t)(n > 0 ? n : 0); }

/* Step 2: which dense layers stream. other: everything that is not dense. */
static int plan_dense(const df_plan_in *in, uint64_t limit, uint64_t other, uint64_t slot, int want_slots,
                      int min_slots, df_plan *out) {
    const int L = in->n_layer;
    const uint64_t *sb = in->layer_stream_bytes, *need = in->layer_buf_bytes, *rd = in->layer_read_bytes;
    out->n_layer = L;
    out->dense_total = in->dense_total;
    out->dense_global = in->dense_global;
    out->n_resident = L;
    out->n_streamed = out->n_buf = 0;
    out->buf_bytes = out->layers_bytes = out->read_per_pass = 0;
    out->dense_bytes = in->dense_total;
    if (!in->dense_stream || L <= 0 || !sb) return DF_OK;
    uint64_t *smax = df_calloc((size_t)L + 1, sizeof(uint64_t)); /* largest buffer of layers >= l */
    if (!smax) return DF_ERR_NOMEM;
    for (int l = L - 1; l >= 0; l--) smax[l] = need[l] > smax[l + 1] ? need[l] : smax[l + 1];
    uint64_t prefix = 0;
    int best = -1, nb_best = 0, rc = DF_OK;
    const uint64_t fixed = in->dense_global + other;
    if (in->force_resident >= 0) {
        best = in->force_resident < L ? in->force_resident : L;
        nb_best = L - best < 2 ? L - best : 2;
    } else if (in->dense_total + other + slots_cost(slot, want_slots) <= limit) {
        best = L; /* everything fits */
    } else {
        for (int k = 0; k < L; k++) {
            int nb = L - k < 2 ? L - k : 2;
            uint64_t c = fixed + prefix + nb * smax[k] + slots_cost(slot, want_slots);
            if (c <= limit) { best = k; nb_best = nb; }
            prefix += sb[k];
        }
        /* nothing resident: as many slots as fit, 2 buffers then 1 */
        for (int nb = L < 2 ? L : 2; best < 0 && nb >= 1; nb--)
            if (fixed + nb * smax[0] + slots_cost(slot, min_slots) <= limit) {
                best = 0;
                nb_best = nb;
            }
        if (best < 0) {
            char a[32], b[32], c[32], d[32], e[32], f[32], sl[96] = "";
            uint64_t nd = fixed + smax[0] + slots_cost(slot, min_slots);
            if (slot) snprintf(sl, sizeof sl, " + %d expert slots of %s", min_slots, df_fmt_bytes(slot, f, sizeof f));
            rc = df_err(DF_ERR_RANGE,
                        "memory limit %s is too small: need at least %s (always-resident dense weights %s + one "
                        "streamed layer buffer %s + KV cache, scratch and overhead %s%s)",
                        df_fmt_bytes(limit, a, sizeof a), df_fmt_bytes(nd, b, sizeof b),
                        df_fmt_bytes(in->dense_global, c, sizeof c), df_fmt_bytes(smax[0], d, sizeof d),
                        df_fmt_bytes(other, e, sizeof e), sl);
            free(smax);
            return rc;
        }
    }
    const int n_streamed = L - best;
    const uint64_t buf = n_streamed ? smax[best] : 0;
    free(smax);
    if (!n_streamed || !buf) return DF_OK; /* nothing streams (or nothing streamable) */
    out->n_resident = best;
    out->n_streamed = n_streamed;
    out->n_buf = nb_best;
    out->buf_bytes = buf;
    out->layers_bytes = 0;
    for (int l = 0; l < best; l++) out->layers_bytes += sb[l];
    for (int l = best; l < L; l++) out->read_per_pass += rd[l];
    out->dense_bytes = in->dense_global + out->layers_bytes + (uint64_t)out->n_buf * out->buf_bytes;
    return DF_OK;
}

/* Step 3: the expert cache. */
static int plan_cache(const df_plan_in *in, df_plan *out) {
    const uint64_t slot = in->slot_bytes;
    uint64_t limit = out->limit;
    if (in->cache_bytes) { /* an exact cache on top of everything else */
        limit = out->dense_bytes + out->kv_bytes + out->scratch_bytes + out->overhead_bytes + in->cache_bytes;
        out->limit = limit;
        out->limit_from_ram = false;
    }
    uint64_t fixed = 0;
    if (!df_add_ok(out->dense_bytes, out->kv_bytes, &fixed) || !df_add_ok(fixed, out->scratch_bytes, &fixed) ||
        !df_add_ok(fixed, out->overhead_bytes, &fixed))
        return df_err(DF_ERR_RANGE, "memory plan: size overflow");
    out->fixed_bytes = fixed;
    const int total = out->n_experts_total;
    const int minw = 2 < total ? 2 : total;
    const uint64_t need = fixed + (uint64_t)(minw > 0 ? minw : 0) * slot;
    out->need_min = need;
    if (need > limit) {
        char a[32], b[32], c[32], d[32], e[32], f[32];
        return df_err(DF_ERR_RANGE,
                      "memory limit %s%s is too small: need at least %s (dense weights %s + KV cache %s + "
                      "scratch/overhead %s + %d expert slots of %s)",
                      df_fmt_bytes(limit, a, sizeof a), out->limit_from_ram ? " (available RAM - reserve)" : "",
                      df_fmt_bytes(need, b, sizeof b), df_fmt_bytes(out->dense_bytes, c, sizeof c),
                      df_fmt_bytes(out->kv_bytes, d, sizeof d),
                      df_fmt_bytes(out->scratch_bytes + out->overhead_bytes, e, sizeof e), minw,
                      df_fmt_bytes(slot, f, sizeof f));
    }
    uint64_t ns = slot ? (limit - fixed) / slot : 0;
    if (ns >= (uint64_t)total) {
        ns = (uint64_t)total;
        out->all_resident = true;
    }
    out->n_slots = (int)ns;
    out->cache_bytes = ns * slot;
    out->frac_resident = total ? (double)ns / total : 1.0;
    return DF_OK;
}

int df_plan_make(const df_plan_in *in, df_plan *out) {
    memset(out, 0, sizeof *out);
    const uint64_t reserve = in->mem_reserve ? in->mem_reserve : (1ull << 30);
    if (in->mem_limit) out->limit = in->mem_limit;
    else {
        out->limit = in->mem_available > reserve ? in->mem_available - reserve : 0;
        out->limit_from_ram = true;
    }
    out->kv_bytes = in->kv_bytes;
    out->scratch_bytes = in->n_batch_opts > 0 ? in->batch_scratch[0] : in->scratch_bytes;
    out->n_batch = in->n_batch_opts > 0 ? in->batch[0] : 0;
    out->overhead_bytes = in->overhead_bytes ? in->overhead_bytes : DF_PLAN_OVERHEAD;
    uint64_t ovh = out->overhead_bytes;
    out->expert_total_bytes = in->expert_bytes;
    out->n_experts_total = in->n_expert_pairs;
    out->slot_bytes = in->slot_bytes;
    uint64_t other = in->kv_bytes + out->scratch_bytes + ovh;

    /* 1. do the routed experts stream? */
    if (in->has_experts) {
        if (in->experts_packed || in->stream_experts > 0) out->experts_stream = true;
        else if (in->stream_experts < 0)
            out->experts_stream = in->dense_total + in->expert_bytes + other > out->limit;
    }
    /* streamed through a buffered engine: its reads in flight sit in the page cache */
    if (out->experts_stream && in->page_cache_bytes) {
        out->page_cache_bytes = in->page_cache_bytes;
        out->overhead_bytes += in->page_cache_bytes;
        ovh = out->overhead_bytes;
        other = in->kv_bytes + out->scratch_bytes + ovh;
    }
    /* token embeddings by row: a pass reads one row per token (a few KiB) from the file, so when
     * experts stream the table's bytes go to the cache instead, if they buy a slot at least */
    df_plan_in din = *in;
    if (in->embd_bytes && in->embd_bytes <= in->dense_global &&
        (in->embd_rows > 0 || (in->embd_rows < 0 && out->experts_stream && in->embd_bytes >= in->slot_bytes))) {
        out->embd_rows = true;
        out->embd_bytes = in->embd_bytes;
        din.dense_total -= in->embd_bytes;
        din.dense_global -= in->embd_bytes;
    }
    /* 2. prompt chunks under memory pressure: scratch for a long chunk is idle during
     * generation while the expert cache works on every token, so when experts stream the chunk
     * shrinks (halving, down to the smallest choice) until its scratch is at most 1/32 of what
     * the limit leaves after KV, overhead and all dense weights (so the cache keeps >= 90% of
     * what decode needs besides one token's scratch wherever a slot is <= 5% of it: K2 geometry
     * at 1 GiB, docs/streaming.md; the price: more passes, each reading its experts, for long
     * prompts). An exact cache size or a chunk the caller chose (batch_fixed) keeps the chunk. */
    if (out->experts_stream && in->n_batch_opts > 1 && !in->cache_bytes && !in->batch_fixed) {
        const uint64_t fixed = din.dense_total + in->kv_bytes + ovh;
        const uint64_t room = out->limit > fixed ? out->limit - fixed : 0;
        const bool all_fit = in->slot_bytes && room >= out->scratch_bytes &&
                             (room - out->scratch_bytes) / in->slot_bytes >= (uint64_t)in->n_expert_pairs;
        int i = 0;
        while (!all_fit && i + 1 < in->n_batch_opts && in->batch_scratch[i] > room / 32) i++;
        out->scratch_bytes = in->batch_scratch[i];
        out->n_batch = in->batch[i];
        other = in->kv_bytes + out->scratch_bytes + ovh;
    }
    /* 3. dense layers (an exact expert cache keeps every dense layer resident unless forced) */
    uint64_t slot = 0;
    int want = 0, min = 0;
    if (out->experts_stream) {
        const int pairs = in->n_expert_pairs;
        slot = in->slot_bytes;
        want = in->n_expert_used > 8 ? in->n_expert_used : 8;
        want = want < pairs ? want : pairs;
        min = pairs < 2 ? pairs : 2;
    }
    if (in->force_resident < 0 && out->experts_stream && in->cache_bytes) din.dense_stream = false;
    int rc = plan_dense(&din, out->limit, other + (out->experts_stream ? 0 : in->expert_bytes), slot, want, min, out);
    if (rc < 0) return rc;
    /* 4. the expert cache */
    if (out->experts_stream) return plan_cache(in, out);
    return DF_OK;
}

const char *df_plan_str(const df_plan *p, char *buf, size_t cap) {
    char l[32], d[32], k[32], s[32], o[32], c[32], sl[32], t[32], f[32], pc[96] = "", pcb[32];
    const uint64_t used = p->fixed_bytes + p->cache_bytes;
    if (p->page_cache_bytes)
        snprintf(pc, sizeof pc, " (%s of it page cache for the buffered engine's reads in flight)",
                 df_fmt_bytes(p->page_cache_bytes, pcb, sizeof pcb));
    snprintf(buf, cap,
             "memory plan: limit %s%s\n"
             "  dense weights  %s\n"
             "  KV cache       %s\n"
             "  scratch        %s\n"
             "  overhead       %s%s\n"
             "  expert cache   %s = %d slots x %s (%.1f%% of %d experts, %s on disk)%s\n"
             "  free           %s",
             df_fmt_bytes(p->limit, l, sizeof l), p->limit_from_ram ? " (available RAM - reserve)" : "",
             df_fmt_bytes(p->dense_bytes, d, sizeof d), df_fmt_bytes(p->kv_bytes, k, sizeof k),
             df_fmt_bytes(p->scratch_bytes, s, sizeof s), df_fmt_bytes(p->overhead_bytes, o, sizeof o), pc,
             df_fmt_bytes(p->cache_bytes, c, sizeof c), p->n_slots, df_fmt_bytes(p->slot_bytes, sl, sizeof sl),
             100.0 * p->frac_resident, p->n_experts_total, df_fmt_bytes(p->expert_total_bytes, t, sizeof t),
             p->all_resident ? " — all resident" : "",
             df_fmt_bytes(p->limit > used ? p->limit - used : 0, f, sizeof f));
    if (p->embd_rows) {
        const size_t n = strlen(buf);
        snprintf(buf + n, cap - n, "\n  embeddings     %s read by row from the file (not resident)",
                 df_fmt_bytes(p->embd_bytes, t, sizeof t));
    }
    return buf;
}

const char *df_plan_dense_str(const df_plan *p, char *buf, size_t cap) {
    char a[32], b[32], c[32], d[32];
    if (!p->n_streamed) {
        snprintf(buf, cap, "dense: all %d layers resident (%s)", p->n_layer, df_fmt_bytes(p->dense_total, a, sizeof a));
        return buf;
    }
    snprintf(buf, cap,
             "dense: %d of %d layers resident (%s + %s always resident), %d streamed through %d buffer%s of %s "
             "(%s): reads %s per token",
             p->n_resident, p->n_layer, df_fmt_bytes(p->layers_bytes, a, sizeof a),
             df_fmt_bytes(p->dense_global, b, sizeof b), p->n_streamed, p->n_buf, p->n_buf == 1 ? "" : "s",
             df_fmt_bytes(p->buf_bytes, c, sizeof c), p->n_buf == 1 ? "no overlap" : "double-buffered",
             df_fmt_bytes(p->read_per_pass, d, sizeof d));
    return buf;
}
