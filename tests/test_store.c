/* test_store.c — expert store: random acquire/release/prefetch sequences for budgets from the
 * minimum working set to all-resident and every engine never hand out wrong bytes (a pinned
 * slot that got evicted and reused would show up as wrong bytes), never exceed the budget;
 * hit/miss accounting; router look-ahead (scoring, reads, promotion/withdrawal, auto gate); hot set; records with checksums; injected EIO / short read /
 * corruption and a truncated file each give an error naming layer, expert, file and offset. */
#include "weights/expert_store.h"
#include "runtime/plan.h"
#include "base/sysmem.h"
#include "testlib.h"

#include <pthread.h>
#include <unistd.h>

enum { NL = 4, NE = 8 };
static const uint64_t PART_BYTES[3] = {5000, 5000, 7232}; /* not multiples of 4 KiB */

static uint8_t byte_at(uint64_t off) { uint64_t x = off * 0x9E3779B97F4A7C15ull; return (uint8_t)(x >> 56); }

static uint64_t rng = 0x12345678abcdefull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

/* GGUF-like layout: per layer, three "tensors" (down, gate, up order), experts contiguous
 * inside each; tensors start at 32-byte (not 4 KiB) aligned offsets. Also a layer without
 * experts (layer 1: all parts absent) like a dense first layer. */
static uint64_t build_file(const char *path, df_expert_loc *locs, uint64_t trunc) {
    uint64_t off = 96;
    static const int order[3] = {DF_EXPERT_DOWN, DF_EXPERT_GATE, DF_EXPERT_UP};
    for (int l = 0; l < NL; l++)
        for (int oi = 0; oi < 3; oi++) {
            int p = order[oi];
            for (int e = 0; e < NE; e++) {
                df_expert_loc *lc = &locs[(l * NE + e) * 3 + p];
                lc->shard = 0; lc->type = 8 + p;
                if (l == 1) { lc->offset = 0; lc->nbytes = 0; continue; }
                lc->offset = off; lc->nbytes = PART_BYTES[p];
                off += PART_BYTES[p];
            }
            off = df_pad(off, 32);
        }
    FILE *f = fopen(path, "wb");
    uint64_t size = trunc ? trunc : off;
    for (uint64_t i = 0; i < size; i++) fputc(byte_at(i), f);
    fclose(f);
    return size;
}

static bool check_w(const df_expert_loc *locs, int l, int e, const df_expert_w *w) {
    for (int p = 0; p < 3; p++) {
        const df_expert_loc *lc = &locs[(l * NE + e) * 3 + p];
        if (!lc->nbytes) { if (w->w[p]) return false; continue; }
        if (!w->w[p] || w->type[p] != lc->type) return false;
        const uint8_t *b = w->w[p];
        for (uint64_t i = 0; i < lc->nbytes; i += 97)
            if (b[i] != byte_at(lc->offset + i)) return false;
        if (b[lc->nbytes - 1] != byte_at(lc->offset + lc->nbytes - 1)) return false;
    }
    return true;
}

static int pick_layer(void) { int l = (int)(rnd() % NL); return l == 1 ? 2 : l; }

/* One thread: hold up to `hold` experts pinned, re-verify every pinned one after each step. */
typedef struct { df_store *s; const df_expert_loc *locs; int hold, steps, bad, errs; uint64_t seed; } worker_arg;
static void *worker(void *arg) {
    worker_arg *a = arg;
    uint64_t r = a->seed;
    int held_l[8], held_e[8], nh = 0;
    df_expert_w held_w[8];
    for (int step = 0; step < a->steps; step++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        int op = (int)(r % 10);
        if (op < 5 && nh < a->hold) {
            int l = (int)((r >> 8) % NL); if (l == 1) l = 0;
            int e = (int)((r >> 16) % NE);
            bool dup = false;
            for (int i = 0; i < nh; i++) dup |= held_l[i] == l && held_e[i] == e;
            df_expert_w w;
            int rc = df_store_acquire(a->s, l, e, &w);
            if (rc) { a->errs++; fprintf(stderr, "acquire: %s\n", df_errmsg()); continue; }
            if (!check_w(a->locs, l, e, &w)) a->bad++;
            if (dup) { df_store_release(a->s, l, e); continue; }
            held_l[nh] = l; held_e[nh] = e; held_w[nh] = w; nh++;
        } else if (op < 8 && nh) {
            int i = (int)((r >> 8) % nh);
            if (!check_w(a->locs, held_l[i], held_e[i], &held_w[i])) a->bad++;
            df_store_release(a->s, held_l[i], held_e[i]);
            held_l[i] = held_l[nh - 1]; held_e[i] = held_e[nh - 1]; held_w[i] = held_w[nh - 1]; nh--;
        } else {
            int ex[4];
            for (int i = 0; i < 4; i++) ex[i] = (int)((r >> (8 * i + 8)) % NE);
            /* router look-ahead (low-priority reads, cancelled when mispredicted) or prefetch */
            if ((r >> 48) & 1) df_store_lookahead(a->s, (int)((r >> 40) % NL), ex, 4);
            else df_store_prefetch(a->s, (int)((r >> 40) % NL), ex, 4);
        }
        for (int i = 0; i < nh; i++)
            if (!check_w(a->locs, held_l[i], held_e[i], &held_w[i])) a->bad++;
    }
    for (int i = 0; i < nh; i++) df_store_release(a->s, held_l[i], held_e[i]);
    return NULL;
}

static const char *g_fault; /* injected faults for the next mk() (df_io_params.fault) */
static df_store *mk(const char *path, const df_expert_loc *locs, const df_expert_record *recs, uint64_t budget,
                    int engine, int prefetch, int min_slots) {
    const char *paths[1] = {path};
    df_store_params p = df_store_default_params();
    p.n_layers = NL; p.n_experts = NE; p.locs = locs; p.records = recs;
    p.paths = paths; p.n_files = 1; p.budget_bytes = budget; p.min_slots = min_slots;
    p.prefetch = prefetch; p.io.engine = engine; p.io.n_threads = 3; p.io.fault = g_fault;
    df_store *s = NULL;
    int rc = df_store_create(&p, &s);
    CHECK_MSG(rc == DF_OK, "create: %s", df_errmsg());
    return s;
}

int main(void) {
    df_init();
    df_log_set_level(DF_LOG_ERROR);
    /* XXH64 reference values */
    CHECK(df_xxh64("", 0, 0) == 0xEF46DB3751D8E999ull);
    CHECK(df_xxh64("a", 1, 0) == 0xD24EC4F1A98C6E5Bull);
    CHECK(df_xxh64("abc", 3, 0) == 0x44BC2CF5AD770999ull);
    CHECK(df_xxh64("Nobody inspects the spammish repetition", 39, 0) == 0xFBCEA83C8A378BF1ull);

    char path[256], rpath[256];
    snprintf(path, sizeof path, "/tmp/df_test_store_%d.bin", (int)getpid());
    snprintf(rpath, sizeof rpath, "/tmp/df_test_store_rec_%d.bin", (int)getpid());
    static df_expert_loc locs[NL * NE * 3];
    uint64_t fsize = build_file(path, locs, 0);

    const char *paths[1] = {path};
    df_store_params pp = df_store_default_params();
    pp.n_layers = NL; pp.n_experts = NE; pp.locs = locs; pp.paths = paths; pp.n_files = 1;
    uint64_t sb = df_store_slot_bytes(&pp);
    CHECK(sb >= PART_BYTES[0] + PART_BYTES[1] + PART_BYTES[2]);
    CHECK(sb % DF_IO_ALIGN == 0);

    /* too small a budget: clear refusal */
    {
        pp.budget_bytes = sb; pp.min_slots = 2;
        df_store *s = NULL;
        CHECK_EQ_INT(df_store_create(&pp, &s), DF_ERR_RANGE);
        CHECK(strstr(df_errmsg(), "at least 2") != NULL);
    }

    /* single thread, budgets from 2 slots to all resident, every engine */
    int n_used = (NL - 1) * NE;
    int budgets[] = {2, 3, 2 * NL, 12, n_used, NL * NE + 5};
    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
        if (!df_io_engine_available(e)) continue;
        for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
            uint64_t budget = (uint64_t)budgets[b] * sb + sb / 2;
            df_store *s = mk(path, locs, NULL, budget, e, (int)(b % 3), 2);
            if (!s) continue;
            worker_arg a = {s, locs, 2, 600, 0, 0, 1000 + b + 10 * e};
            worker(&a);
            CHECK_EQ_INT(a.bad, 0);
            CHECK_EQ_INT(a.errs, 0);
            df_store_stats st;
            df_store_get_stats(s, &st);
            CHECK(st.cache_bytes <= budget);
            CHECK((uint64_t)st.n_slots * st.slot_bytes <= budget);
            CHECK(st.n_slots == (budgets[b] > NL * NE ? NL * NE : budgets[b]));
            CHECK(st.hits + st.misses > 0);
            if (budgets[b] >= NL * NE) CHECK(st.evictions == 0);
            df_store_free(s);
        }
    }

    /* hit/miss accounting, layer without experts, bad index */
    {
        df_store *s = mk(path, locs, NULL, 4 * sb, DF_IO_PREAD, DF_PREFETCH_OFF, 2);
        df_expert_w w;
        CHECK_EQ_INT(df_store_acquire(s, 0, 3, &w), DF_OK);
        CHECK(check_w(locs, 0, 3, &w));
        df_store_release(s, 0, 3);
        CHECK_EQ_INT(df_store_acquire(s, 0, 3, &w), DF_OK);
        df_store_release(s, 0, 3);
        df_store_stats st;
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.hits, 1);
        CHECK_EQ_INT(st.misses, 1);
        CHECK_EQ_INT(st.bytes_read, PART_BYTES[0] + PART_BYTES[1] + PART_BYTES[2]);
        CHECK_EQ_INT(df_store_acquire(s, 1, 0, &w), DF_ERR_INVALID);
        CHECK_EQ_INT(df_store_acquire(s, NL, 0, &w), DF_ERR_INVALID);
        /* all slots pinned: clear error, not a hang */
        df_expert_w h[4];
        for (int i = 0; i < 4; i++) CHECK_EQ_INT(df_store_acquire(s, 2, i, &h[i]), DF_OK);
        CHECK_EQ_INT(df_store_acquire(s, 2, 7, &w), DF_ERR_RANGE);
        CHECK(strstr(df_errmsg(), "layer 2 expert 7") && strstr(df_errmsg(), "pinned"));
        for (int i = 0; i < 4; i++) { CHECK(check_w(locs, 2, i, &h[i])); df_store_release(s, 2, i); }
        /* prefetch then acquire: counted as used */
        df_store_free(s);
        s = mk(path, locs, NULL, 16 * sb, DF_IO_PREAD, DF_PREFETCH_ON, 2);
        int ex[3] = {5, 6, 7};
        df_store_prefetch(s, 3, ex, 3);
        for (int i = 0; i < 3; i++) { CHECK_EQ_INT(df_store_acquire(s, 3, ex[i], &w), DF_OK); CHECK(check_w(locs, 3, ex[i], &w)); df_store_release(s, 3, ex[i]); }
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.prefetch_issued, 3);
        CHECK_EQ_INT(st.prefetch_used, 3);
        CHECK_EQ_INT(st.hits, 0);   /* first use of a prefetched expert is not a reuse */
        CHECK_EQ_INT(st.misses, 3);
        for (int i = 0; i < 3; i++) { CHECK_EQ_INT(df_store_acquire(s, 3, ex[i], &w), DF_OK); df_store_release(s, 3, ex[i]); }
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.hits, 3);
        char buf[512];
        CHECK(strstr(df_store_stats_str(&st, buf, sizeof buf), "hit 50.0% (3/6)") != NULL);
        df_store_free(s);
    }

    /* router look-ahead: predictions scored against the real routing, reads started for the
     * predicted experts, mispredicted ones withdrawn (not started) or wasted, right bytes */
    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
        if (!df_io_engine_available(e)) continue;
        df_store *s = mk(path, locs, NULL, 16 * sb, e, DF_PREFETCH_ON, 2);
        if (!s) continue;
        df_expert_w w;
        df_store_stats st;
        int pred[3] = {1, 2, 3}, real[3] = {1, 2, 5};
        df_store_lookahead(s, 2, pred, 3);
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.lookahead_issued, 3);
        CHECK_EQ_INT(st.lookahead_predicted, 0); /* scored when layer 2 routes */
        df_store_prefetch(s, 2, real, 3);
        for (int i = 0; i < 3; i++) {
            CHECK_EQ_INT(df_store_acquire(s, 2, real[i], &w), DF_OK);
            CHECK(check_w(locs, 2, real[i], &w));
            df_store_release(s, 2, real[i]);
        }
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.lookahead_predicted, 3);
        CHECK_EQ_INT(st.lookahead_correct, 2);
        CHECK_EQ_INT(st.lookahead_used, 2);
        CHECK_EQ_INT(st.lookahead_wasted + st.lookahead_cancelled, 1);
        CHECK_EQ_INT(st.prefetch_issued, 1);     /* expert 5: the layer's own prefetch */
        CHECK_EQ_INT(st.misses, 3);
        char buf[640];
        CHECK(strstr(df_store_stats_str(&st, buf, sizeof buf), "look-ahead on: accuracy 66.7% (2/3)") != NULL);
        /* expert 3 (mispredicted) is still correct if acquired later */
        CHECK_EQ_INT(df_store_acquire(s, 2, 3, &w), DF_OK);
        CHECK(check_w(locs, 2, 3, &w));
        df_store_release(s, 2, 3);
        df_store_free(s);
    }
    {
        /* off: no prediction, no reads; auto: scores >= 32 predictions before reading ahead */
        df_store *s = mk(path, locs, NULL, 16 * sb, DF_IO_PREAD, DF_PREFETCH_OFF, 2);
        int ex[4] = {0, 1, 2, 3};
        CHECK(!df_store_lookahead_wanted(s));
        df_store_lookahead(s, 2, ex, 4);
        df_store_prefetch(s, 2, ex, 4);
        df_store_stats st;
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.lookahead_predicted, 0);
        CHECK_EQ_INT(st.lookahead_issued + st.prefetch_issued, 0);
        df_store_set_prefetch(s, DF_PREFETCH_AUTO);
        CHECK(df_store_lookahead_wanted(s));
        for (int k = 0; k < 8; k++) { /* 8 x 4 = 32 scored predictions, all correct */
            int l = k % 2 ? 3 : 2;
            for (int i = 0; i < 4; i++) ex[i] = (k + i) % NE;
            df_store_lookahead(s, l, ex, 4);
            df_store_get_stats(s, &st);
            CHECK_EQ_INT(st.lookahead_issued, 0); /* not before the measurement */
            df_store_prefetch(s, l, ex, 4);
            for (int i = 0; i < 4; i++) { /* as the forward pass: acquire what was routed */
                df_expert_w w;
                CHECK_EQ_INT(df_store_acquire(s, l, ex[i], &w), DF_OK);
                df_store_release(s, l, ex[i]);
            }
        }
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.lookahead_predicted, 32);
        CHECK_EQ_INT(st.lookahead_correct, 32);
        for (int i = 0; i < 4; i++) ex[i] = (i + 5) % NE;
        df_store_lookahead(s, 0, ex, 4); /* accuracy 100 %, hit rate 0: reads ahead now */
        df_store_get_stats(s, &st);
        CHECK(st.lookahead_active && st.lookahead_depth >= 1);
        CHECK(st.lookahead_issued >= 1);
        df_store_free(s);
    }

    /* multi-threaded: 3 threads, 3 pins each, prefetch mixed in */
    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
        if (!df_io_engine_available(e)) continue;
        df_store *s = mk(path, locs, NULL, 11 * sb, e, DF_PREFETCH_ON, 9);
        if (!s) continue;
        pthread_t th[3];
        worker_arg a[3];
        for (int i = 0; i < 3; i++) {
            a[i] = (worker_arg){s, locs, 3, 1500, 0, 0, 77 + i * 1000 + e};
            pthread_create(&th[i], NULL, worker, &a[i]);
        }
        for (int i = 0; i < 3; i++) { pthread_join(th[i], NULL); CHECK_EQ_INT(a[i].bad, 0); CHECK_EQ_INT(a[i].errs, 0); }
        df_store_free(s);
    }

    /* hot set */
    {
        df_store *s = mk(path, locs, NULL, 10 * sb, DF_IO_PREAD, DF_PREFETCH_OFF, 2);
        char hp[256];
        snprintf(hp, sizeof hp, "/tmp/df_test_store_%d.hot", (int)getpid());
        FILE *f = fopen(hp, "w");
        fprintf(f, "# layer expert count\n0 1 5\n2,3,50\n3 4 20\n0 2 1\n3 5 9\n0 6 3\n2 2 2\n3 3 3\n");
        fclose(f);
        int *hl, *he, hn;
        CHECK_EQ_INT(df_store_read_hot_file(hp, NL, NE, &hl, &he, &hn), DF_OK);
        CHECK_EQ_INT(hn, 8);
        CHECK(hl[0] == 2 && he[0] == 3 && hl[1] == 3 && he[1] == 4);
        int pinned = df_store_pin_hot(s, hl, he, hn);
        CHECK_EQ_INT(pinned, 6); /* stops when 10 - hot would drop below 2 * min_slots */
        worker_arg a = {s, locs, 2, 800, 0, 0, 4242};
        worker(&a);
        CHECK_EQ_INT(a.bad, 0);
        CHECK_EQ_INT(a.errs, 0);
        df_store_stats st;
        df_store_get_stats(s, &st);
        uint64_t misses = st.misses;
        df_expert_w w;
        CHECK_EQ_INT(df_store_acquire(s, 2, 3, &w), DF_OK); /* hot: still cached */
        df_store_release(s, 2, 3);
        df_store_get_stats(s, &st);
        CHECK_EQ_INT(st.misses, misses);
        CHECK_EQ_INT(st.n_hot, 6);
        free(hl); free(he);
        f = fopen(hp, "w");
        fprintf(f, "0 1 5\n9 3 50\n");
        fclose(f);
        CHECK_EQ_INT(df_store_read_hot_file(hp, NL, NE, &hl, &he, &hn), DF_ERR_FORMAT);
        CHECK(strstr(df_errmsg(), ":2: layer 9") != NULL);
        CHECK_EQ_INT(df_store_parse_preload("0:1,3:7", NL, NE, &hl, &he, &hn), DF_OK);
        CHECK(hn == 2 && hl[1] == 3 && he[1] == 7);
        free(hl); free(he);
        CHECK_EQ_INT(df_store_parse_preload("0:1,x", NL, NE, &hl, &he, &hn), DF_ERR_INVALID);
        unlink(hp);
        df_store_free(s);
    }

    /* injected faults in per-part mode: message names layer, expert, part, file, offset */
    for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
        if (!df_io_engine_available(e)) continue;
        for (int kind = DF_FAULT_EIO; kind <= DF_FAULT_SHORT; kind++) {
            char env[32];
            snprintf(env, sizeof env, "%s:2", kind == DF_FAULT_EIO ? "eio" : "short");
            g_fault = env;
            df_store *s = mk(path, locs, NULL, 4 * sb, e, DF_PREFETCH_OFF, 2);
            g_fault = NULL;
            df_expert_w w;
            int rc = df_store_acquire(s, 3, 6, &w); /* reads 1..3: down, gate, up -> read 2 is one of them */
            CHECK_EQ_INT(rc, DF_ERR_IO);
            CHECK_MSG(strstr(df_errmsg(), "layer 3 expert 6") && strstr(df_errmsg(), path) && strstr(df_errmsg(), "at offset "),
                      "msg: %s", df_errmsg());
            /* the error does not stick: next acquire reads again and succeeds */
            CHECK_EQ_INT(df_store_acquire(s, 3, 6, &w), DF_OK);
            CHECK(check_w(locs, 3, 6, &w));
            df_store_release(s, 3, 6);
            df_store_free(s);
        }
    }

    /* packed-style records: one aligned record per expert, checksum verified */
    {
        static df_expert_loc rlocs[NL * NE * 3];
        static df_expert_record recs[NL * NE];
        FILE *f = fopen(rpath, "wb");
        uint64_t off = 4096;
        uint8_t *zero = calloc(1, 4096);
        fwrite(zero, 1, 4096, f);
        uint8_t *rec = malloc(64 << 10);
        for (int l = 0; l < NL; l++)
            for (int e = 0; e < NE; e++) {
                int k = l * NE + e;
                uint64_t ro = 0;
                for (int p = 0; p < 3; p++) {
                    const df_expert_loc *src = &locs[k * 3 + p];
                    df_expert_loc *d = &rlocs[k * 3 + p];
                    *d = *src;
                    if (!src->nbytes) continue;
                    d->offset = off + ro;
                    for (uint64_t i = 0; i < src->nbytes; i++) rec[ro + i] = byte_at(src->offset + i);
                    ro += df_pad(src->nbytes, 64);
                }
                recs[k].file = 0;
                recs[k].offset = off;
                recs[k].nbytes = ro;
                recs[k].xxh64 = df_xxh64(rec, ro, 0);
                if (ro) {
                    uint64_t padded = df_pad(ro, 4096);
                    memset(rec + ro, 0, padded - ro);
                    fwrite(rec, 1, padded, f);
                    off += padded;
                }
            }
        fclose(f);
        free(zero);
        free(rec);
        const char *rp[1] = {rpath};
        df_store_params p = df_store_default_params();
        p.n_layers = NL; p.n_experts = NE; p.locs = rlocs; p.records = recs; p.paths = rp; p.n_files = 1;
        uint64_t rsb = df_store_slot_bytes(&p);
        for (int e = DF_IO_PREAD; e < DF_IO_NENGINES; e++) {
            if (!df_io_engine_available(e)) continue;
            df_store *s = mk(rpath, rlocs, recs, 5 * rsb, e, DF_PREFETCH_AUTO, 2);
            if (!s) continue;
            /* content is checked against the original (unpacked) offsets */
            df_expert_w w;
            for (int i = 0; i < 200; i++) {
                int l = pick_layer(), x = (int)(rnd() % NE);
                int rc = df_store_acquire(s, l, x, &w);
                CHECK_MSG(rc == DF_OK, "%s", df_errmsg());
                if (rc) break;
                CHECK(check_w(locs, l, x, &w));
                df_store_release(s, l, x);
            }
            df_store_free(s);
            /* corruption -> checksum error naming layer, expert, file, offset */
            g_fault = "corrupt:1";
            s = mk(rpath, rlocs, recs, 5 * rsb, e, DF_PREFETCH_OFF, 2);
            g_fault = NULL;
            int rc = df_store_acquire(s, 2, 5, &w);
            CHECK_EQ_INT(rc, DF_ERR_CHECKSUM);
            char want[512];
            snprintf(want, sizeof want, "layer 2 expert 5: checksum mismatch in %s at offset %llu", rpath,
                     (unsigned long long)recs[2 * NE + 5].offset);
            CHECK_MSG(strstr(df_errmsg(), want) != NULL, "msg: %s", df_errmsg());
            CHECK_EQ_INT(df_store_acquire(s, 2, 5, &w), DF_OK);
            df_store_release(s, 2, 5);
            df_store_free(s);
            /* EIO on a record */
            g_fault = "eio:1";
            s = mk(rpath, rlocs, recs, 5 * rsb, e, DF_PREFETCH_OFF, 2);
            g_fault = NULL;
            rc = df_store_acquire(s, 3, 1, &w);
            CHECK_EQ_INT(rc, DF_ERR_IO);
            snprintf(want, sizeof want, "layer 3 expert 1: %s: read of %llu bytes at offset %llu", rpath,
                     (unsigned long long)recs[3 * NE + 1].nbytes, (unsigned long long)recs[3 * NE + 1].offset);
            CHECK_MSG(strstr(df_errmsg(), want) != NULL, "msg: %s", df_errmsg());
            df_store_free(s);
        }
        /* a part outside its record is refused at create */
        rlocs[0].offset = recs[0].offset + recs[0].nbytes;
        df_store *s = NULL;
        p.budget_bytes = 5 * rsb;
        CHECK_EQ_INT(df_store_create(&p, &s), DF_ERR_FORMAT);
        CHECK(strstr(df_errmsg(), "layer 0 expert 0 gate") != NULL);
        unlink(rpath);
    }

    /* truncated file: refused at create, naming layer, expert, file and sizes */
    {
        build_file(path, locs, fsize - 100);
        df_store *s = NULL;
        pp.budget_bytes = 4 * sb;
        CHECK_EQ_INT(df_store_create(&pp, &s), DF_ERR_FORMAT);
        CHECK_MSG(strstr(df_errmsg(), "truncated") && strstr(df_errmsg(), path) && strstr(df_errmsg(), "layer 3 expert"),
                  "msg: %s", df_errmsg());
    }
    unlink(path);

    /* memory plan */
    {
        df_plan_in in = {0};
        in.has_experts = true; in.stream_experts = 1;
        in.dense_total = 1000ull << 20; in.kv_bytes = 100ull << 20; in.scratch_bytes = 36ull << 20;
        in.slot_bytes = 24ull << 20; in.n_expert_pairs = 1000; in.expert_bytes = 1000ull * (24ull << 20);
        in.n_expert_used = 8; in.force_resident = -1;
        in.mem_limit = 4ull << 30;
        df_plan pl;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK(pl.experts_stream && pl.overhead_bytes == DF_PLAN_OVERHEAD);
        CHECK_EQ_INT(pl.n_slots, (int)(((4ull << 30) - (1200ull << 20)) / (24ull << 20)));
        CHECK(pl.fixed_bytes + pl.cache_bytes <= in.mem_limit);
        CHECK(!pl.all_resident);
        CHECK_NEAR(pl.frac_resident, pl.n_slots / 1000.0, 1e-9);
        char buf[1024];
        CHECK(strstr(df_plan_str(&pl, buf, sizeof buf), "expert cache") != NULL);
        /* everything fits */
        in.mem_limit = 64ull << 30;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK(pl.all_resident && pl.n_slots == 1000);
        /* decided by size: all of it fits, so the experts stay resident */
        in.stream_experts = -1;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK(!pl.experts_stream && pl.n_slots == 0);
        in.mem_limit = 4ull << 30;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK(pl.experts_stream);
        in.stream_experts = 1;
        /* an exact cache: the limit becomes what it costs on top of everything else */
        in.cache_bytes = 10 * (24ull << 20);
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK_EQ_INT(pl.n_slots, 10);
        in.cache_bytes = 0;
        /* smallest working set: dense + kv + scratch + overhead + 2 slots = 1248 MiB */
        in.mem_limit = 1248ull << 20;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK_EQ_INT(pl.n_slots, 2);
        in.mem_limit = (1248ull << 20) - 1;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_ERR_RANGE);
        CHECK_MSG(strstr(df_errmsg(), "need at least 1.22 GiB") != NULL, "msg: %s", df_errmsg());
        /* token embeddings by row: 100 MiB of the dense bytes (always resident) leave the plan
         * when experts stream and they buy a slot (24 MiB), not when tied (0), smaller than a
         * slot, asked off, or the experts are resident */
        {
            df_plan_in e = in;
            e.mem_limit = 4ull << 30; e.dense_global = 200ull << 20; e.embd_bytes = 100ull << 20; e.embd_rows = -1;
            CHECK_EQ_INT(df_plan_make(&e, &pl), DF_OK);
            CHECK(pl.embd_rows && pl.embd_bytes == (100ull << 20) && pl.dense_bytes == (900ull << 20));
            CHECK_EQ_INT(pl.n_slots, (int)(((4ull << 30) - (1100ull << 20)) / (24ull << 20)));
            CHECK(strstr(df_plan_str(&pl, buf, sizeof buf), "read by row from the file") != NULL);
            e.embd_bytes = 20ull << 20; /* under a slot */
            CHECK_EQ_INT(df_plan_make(&e, &pl), DF_OK);
            CHECK(!pl.embd_rows && pl.dense_bytes == (1000ull << 20));
            e.embd_bytes = 100ull << 20; e.embd_rows = 0;
            CHECK_EQ_INT(df_plan_make(&e, &pl), DF_OK);
            CHECK(!pl.embd_rows);
            e.embd_rows = -1; e.stream_experts = 0; e.mem_limit = 64ull << 30;
            CHECK_EQ_INT(df_plan_make(&e, &pl), DF_OK);
            CHECK(!pl.embd_rows && !pl.experts_stream);
            e.embd_rows = 1; /* forced (tests): whenever the table can be read by row */
            CHECK_EQ_INT(df_plan_make(&e, &pl), DF_OK);
            CHECK(pl.embd_rows);
        }
        /* limit from available memory minus reserve */
        in.mem_limit = 0; in.mem_available = 3ull << 30; in.mem_reserve = 1ull << 30;
        CHECK_EQ_INT(df_plan_make(&in, &pl), DF_OK);
        CHECK(pl.limit_from_ram && pl.limit == (2ull << 30));
        /* prompt chunks under pressure: scratch of 512/256/128/64-token chunks 256/128/64/32
         * MiB; with 4 GiB - 1200 MiB of room the chunk shrinks until its scratch <= room/32 */
        {
            const int bt[4] = {512, 256, 128, 64};
            const uint64_t bs[4] = {256ull << 20, 128ull << 20, 64ull << 20, 32ull << 20};
            df_plan_in c = in;
            c.mem_limit = 4ull << 30; c.mem_available = 0; c.scratch_bytes = 0;
            c.n_batch_opts = 4; c.batch = bt; c.batch_scratch = bs;
            CHECK_EQ_INT(df_plan_make(&c, &pl), DF_OK);
            /* room = 4096 - 1000 - 100 - 64 = 2932 MiB: 128 > 91.6, 64 <= 91.6 */
            CHECK_EQ_INT(pl.n_batch, 128);
            CHECK_EQ_INT((long long)pl.scratch_bytes, (long long)(64ull << 20));
            c.batch_fixed = true; /* a chunk the caller chose is kept */
            CHECK_EQ_INT(df_plan_make(&c, &pl), DF_OK);
            CHECK_EQ_INT(pl.n_batch, 512);
            c.batch_fixed = false;
            c.mem_limit = 1400ull << 20; /* tight: the smallest chunk */
            CHECK_EQ_INT(df_plan_make(&c, &pl), DF_OK);
            CHECK_EQ_INT(pl.n_batch, 64);
            CHECK_EQ_INT(pl.n_slots, (int)(((1400ull << 20) - (1164ull << 20) - (32ull << 20)) / (24ull << 20)));
            c.stream_experts = 0; /* resident experts: no pressure on the cache, the chunk stays */
            c.mem_limit = 64ull << 30;
            CHECK_EQ_INT(df_plan_make(&c, &pl), DF_OK);
            CHECK_EQ_INT(pl.n_batch, 512);
        }
        /* dense layers: 4 layers of 100 MiB matrices (+ 10 MiB always resident); at 400 MiB
         * with resident experts, the first layers stay and the rest stream through 2 buffers */
        const uint64_t sb[4] = {100ull << 20, 100ull << 20, 100ull << 20, 100ull << 20};
        df_plan_in d = {0};
        d.dense_total = (410ull << 20); d.dense_global = 10ull << 20; d.n_layer = 4;
        d.layer_stream_bytes = sb; d.layer_buf_bytes = sb; d.layer_read_bytes = sb;
        d.kv_bytes = 1ull << 20; d.scratch_bytes = 1ull << 20; d.dense_stream = true; d.force_resident = -1;
        d.mem_limit = 400ull << 20;
        CHECK_EQ_INT(df_plan_make(&d, &pl), DF_OK);
        CHECK_EQ_INT(pl.n_resident, 1);
        CHECK_EQ_INT(pl.n_streamed, 3);
        CHECK_EQ_INT(pl.n_buf, 2);
        CHECK(pl.dense_bytes == (10ull << 20) + (100ull << 20) + 2 * (100ull << 20) && pl.read_per_pass == 300ull << 20);
        CHECK(strstr(df_plan_dense_str(&pl, buf, sizeof buf), "1 of 4 layers resident") != NULL);
        d.dense_stream = false;
        CHECK_EQ_INT(df_plan_make(&d, &pl), DF_OK);
        CHECK(pl.n_streamed == 0 && pl.dense_bytes == d.dense_total);
        d.dense_stream = true;
        d.mem_limit = 150ull << 20; /* not even one buffer + the rest */
        CHECK_EQ_INT(df_plan_make(&d, &pl), DF_ERR_RANGE);
        CHECK_MSG(strstr(df_errmsg(), "one streamed layer buffer") != NULL, "msg: %s", df_errmsg());
        CHECK(df_mem_available() > 0);
    }
    TEST_MAIN_END("test_store");
}
