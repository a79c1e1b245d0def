/* server.c — OpenAI-compatible HTTP server: a bounded request queue, a scheduler that decodes
 * all --parallel slots as one multi-sequence batch per step, the endpoints, /metrics. Request
 * parsing/validation is in server_parse.c, the agent/llama.cpp fields in server_agents.c, the
 * answers' JSON and SSE streaming in server_stream.c (shared types: server_impl.h).
 * Invariants: a slot's deltafin_ctx is touched only by the scheduler thread, and its cached
 * token list always equals the ctx's KV contents; a job is freed when its last holder (the
 * connection and/or the scheduler) drops it (refs under s->mu). Untrusted input never crashes:
 * every request problem becomes an OpenAI-format error body with a proper status.
 * Threading: libmicrohttpd runs one thread per connection (handlers may block while they wait
 * for their job); one scheduler thread runs every decode; s->mu guards jobs, queue, slots'
 * bookkeeping and metrics. */
#include "app/server_impl.h"

#include <errno.h>
#include <math.h>
#include <malloc.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>

/* ============================== server ===================================================== */

static const char *SERVED_OBJECT_OWNER = "deltafin";

df_server_params df_server_default_params(void) {
    df_server_params p;
    memset(&p, 0, sizeof p);
    p.host = "127.0.0.1";
    p.port = 8080;
    p.n_parallel = 2;
    p.n_queue = 64;
    p.max_body = 1 << 20;
    p.timeout_s = 60;
    p.n_batch = 512;
    p.default_max_tokens = -1;
    p.model_id = "deltafin";
    p.cache_prompt = true;
    return p;
}

/* ---- jobs --------------------------------------------------------------------------------- */

void df_srv_job_unref_locked(job *j) {
    if (--j->refs > 0) return;
    df_srv_agent_free(&j->ag);
    for (int i = 0; j->outs && i < j->n_choices; i++) { free(j->outs[i].text); free(j->outs[i].recs); }
    free(j->outs);
    for (int i = 0; j->ein && i < j->n_ein; i++) free(j->ein[i]);
    free(j->ein);
    free(j->ein_n);
    free(j->embd);
    df_srv_req_free(&j->req);
    free(j->prompt);
    free(j->text);
    free(j->recs);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* append generated text (whole characters: the detokenizer's), apply stop strings; returns
 * true if a stop string matched */
static bool job_append(job *j, const char *piece, size_t n) {
    if (j->len + n + 1 > j->cap) {
        size_t nc = (j->len + n + 1) * 2;
        char *nt = realloc(j->text, nc);
        if (!nt) return false;
        j->text = nt;
        j->cap = nc;
    }
    size_t old = j->len;
    memcpy(j->text + j->len, piece, n);
    j->len += n;
    j->text[j->len] = 0;
    size_t maxstop = 0;
    for (int i = 0; i < j->req.n_stop; i++) {
        size_t l = strlen(j->req.stop[i]);
        if (l > maxstop) maxstop = l;
    }
    if (!maxstop) { j->safe = j->len; return false; }
    size_t from = old >= maxstop ? old - maxstop + 1 : 0;
    const char *best = NULL;
    for (int i = 0; i < j->req.n_stop; i++) {
        const char *hit = memmem(j->text + from, j->len - from, j->req.stop[i], strlen(j->req.stop[i]));
        if (hit && (!best || hit < best)) best = hit;
    }
    if (best) {
        j->len = (size_t)(best - j->text);
        j->text[j->len] = 0;
        if (j->safe > j->len) j->safe = j->len;
        return true;
    }
    /* hold back the longest suffix that could start a stop string */
    size_t hold = 0;
    for (int i = 0; i < j->req.n_stop; i++) {
        size_t l = strlen(j->req.stop[i]);
        for (size_t k = l - 1 < j->len ? l - 1 : j->len; k > hold; k--)
            if (!memcmp(j->text + j->len - k, j->req.stop[i], k)) { hold = k; break; }
    }
    /* a stop string is valid UTF-8, so its prefix starts at a character boundary */
    if (j->len - hold > j->safe) j->safe = j->len - hold;
    return false;
}

static void slot_snapshot_locked(slot *sl) { deltafin_ctx_stats(sl->ctx, &sl->st); }

/* under mu: the running choice is done and another follows: keep its output, restart the slot
 * (its KV holds the prompt, so the next choice decodes only the prompt's last token again) */
static bool next_choice_locked(slot *sl, const char *reason) {
    job *j = sl->j;
    if (j->choice + 1 >= j->n_choices || atomic_load(&j->cancel) || !j->outs) return false;
    const char *rest;
    int rn = deltafin_detok_flush(sl->dt, &rest);
    if (rn > 0) job_append(j, rest, (size_t)rn);
    choice_out *o = &j->outs[j->choice];
    o->text = j->text;
    o->len = j->len;
    o->recs = j->recs;
    o->n_rec = j->n_rec;
    o->n_gen = j->n_gen;
    o->finish = reason;
    o->stop_word = j->stop_word;
    j->n_gen_done += j->n_gen;
    j->text = NULL;
    j->len = j->cap = j->safe = 0;
    j->recs = NULL;
    j->n_rec = j->cap_rec = j->n_gen = 0;
    j->stop_word = false;
    j->choice++;
    deltafin_sampler_free(sl->smp);
    sl->smp = NULL;
    sl->started = false;
    sl->phase = 0;
    pthread_cond_broadcast(&j->cv);
    return true;
}

/* under mu: finish the slot's job */
static void finish_locked(df_server *s, slot *sl, const char *reason, int err_status, const char *msg) {
    job *j = sl->j;
    if (!err_status && (!strcmp(reason, "stop") || !strcmp(reason, "length")) && next_choice_locked(sl, reason)) return;
    j->finish = reason;
    s->n_finished++;
    if (err_status) {
        j->err_status = err_status;
        snprintf(j->err_msg, sizeof j->err_msg, "%s", msg ? msg : "generation failed");
    }
    /* an incomplete character at the end becomes U+FFFD (unless a stop string cut it off) */
    const char *rest;
    int rn = deltafin_detok_flush(sl->dt, &rest);
    if (rn > 0) job_append(j, rest, (size_t)rn);
    j->safe = j->len;
    j->state = J_DONE;
    j->t_end = deltafin_time_ns();
    if (!strcmp(reason, "cancelled")) {
        s->m_cancelled++;
        if (atomic_load(&s->stopping) && !j->err_status) {
            j->err_status = 503;
            snprintf(j->err_msg, sizeof j->err_msg, "server is shutting down");
        }
    }
    else if (!err_status) s->m_completed++;
    s->m_gen_tokens += (uint64_t)(j->n_gen + j->n_gen_done);
    pthread_cond_broadcast(&j->cv);
    pthread_cond_broadcast(&s->idle_cv);
    deltafin_sampler_free(sl->smp);
    sl->smp = NULL;
    sl->j = NULL;
    sl->last_used = deltafin_time_ns();
    slot_snapshot_locked(sl);
    df_srv_job_unref_locked(j);
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

/* embeddings: one input per turn, each decoded from an empty cache */
static void slot_embed(df_server *s, slot *sl) {
    job *j = sl->j;
    int k = j->n_ein_done;
    deltafin_ctx_truncate(sl->ctx, 0);
    sl->n_cache = 0;
    int rc = deltafin_embed(sl->ctx, j->ein[k], j->ein_n[k], true, j->embd + (size_t)k * (size_t)j->n_embd);
    pthread_mutex_lock(&s->mu);
    if (rc < 0) {
        sl->n_cache = 0;
        deltafin_ctx_truncate(sl->ctx, 0);
        if (rc == DELTAFIN_ERR_CANCELLED || atomic_load(&j->cancel)) finish_locked(s, sl, "cancelled", 0, NULL);
        else finish_locked(s, sl, "error", 500, deltafin_errmsg());
    } else {
        memcpy(sl->cache, j->ein[k], sizeof(int32_t) * (size_t)j->ein_n[k]); /* the KV holds them now */
        sl->n_cache = j->ein_n[k];
        s->m_prompt_tokens += (uint64_t)j->ein_n[k];
        slot_snapshot_locked(sl);
        if (++j->n_ein_done == j->n_ein) finish_locked(s, sl, "stop", 0, NULL);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- scheduler: one batch per step ------------------------------------------------------------
 * Each step decodes every active slot in one deltafin_decode_batch call (one forward pass: each
 * dense layer and each routed expert of the slots' union is read once for all of them): the
 * next token of every generating slot and prompt chunks of slots still reading their prompt,
 * at most s->step_prompt prompt tokens per step (at least one chunk, round robin), so a long
 * prompt does not stall the others. A prompt is cut into chunks of s->chunk tokens from its
 * first uncached token whatever else runs, and the engine's batch gives the bits of decoding
 * each slot alone, so a request's tokens do not depend on the other requests. */

/* a slot's first step: reuse the cached prefix, sampler and detokenizer for the job; false if
 * the job ended here */
static bool slot_start(df_server *s, slot *sl) {
    job *j = sl->j;
    sl->started = true;
    sl->pending = false;
    int keep = s->p.cache_prompt ? common_prefix(sl->cache, sl->n_cache, j->prompt, j->n_prompt) : 0;
    if (keep >= j->n_prompt) keep = j->n_prompt - 1; /* re-decode the last one for its logits */
    deltafin_ctx_truncate(sl->ctx, keep);
    sl->n_cache = keep;
    deltafin_sampler_params sp = j->req.sp;
    sp.vocab = deltafin_model_vocab(s->m); /* DRY's sequence breakers */
    df_srv_agent_sampler_params(&j->ag, &sp, j->choice);
    sl->smp = deltafin_sampler_create(&sp);
    deltafin_detok_reset(sl->dt);
    pthread_mutex_lock(&s->mu);
    if (j->choice == 0) { /* n > 1: later choices reuse the prompt */
        j->n_cached = keep;
        s->m_cached_tokens += (uint64_t)keep;
        s->m_prompt_tokens += (uint64_t)j->n_prompt;
    }
    if (!sl->smp) { finish_locked(s, sl, "error", 500, "cannot create the sampler"); pthread_mutex_unlock(&s->mu); return false; }
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < j->n_prompt; i++) deltafin_sampler_accept(sl->smp, j->prompt[i]);
    if (df_srv_agent_attach(&j->ag, s->m, sl->smp) < 0) { /* after the prompt: it feeds the penalties only */
        pthread_mutex_lock(&s->mu);
        finish_locked(s, sl, "error", 500, deltafin_errmsg());
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    return true;
}

/* a generating slot: the next token from the last step's logits, published; true if it is to
 * be decoded (sl->next_id), false if the job ended. Called without the lock. */
static bool slot_sample(df_server *s, slot *sl) {
    job *j = sl->j;
    if (sl->pending) return true; /* sampled before a step that failed for another slot */
    const float *lg = deltafin_logits(sl->ctx, -1);
    if (!lg) {
        pthread_mutex_lock(&s->mu);
        finish_locked(s, sl, "error", 500, "no logits");
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    int32_t id = deltafin_sampler_sample(sl->smp, lg, s->n_vocab);
    if (id < 0) { /* the grammar allows no token */
        pthread_mutex_lock(&s->mu);
        finish_locked(s, sl, "error", 500, deltafin_errmsg());
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    deltafin_sampler_accept(sl->smp, id);
    tokrec rec;
    if (j->req.logprobs) {
        rec.n_top = deltafin_sampler_top(sl->smp, j->req.top_logprobs + 1, rec.top_ids, rec.top_lps);
        rec.id = id;
        rec.lp = rec.n_top > 0 ? rec.top_lps[0] : 0.0f;
    }
    bool eog = deltafin_token_is_eog(s->m, id);
    const char *piece = "", *held = "";
    int pn = 0, hn = 0;
    const char *special = eog ? NULL : df_srv_agent_special(&j->ag, id, &pn);
    if (special) { /* a marker the tool-call parser must see: its text, after what the detokenizer held */
        hn = deltafin_detok_flush(sl->dt, &held);
        if (hn < 0) hn = 0;
        piece = special;
    } else if (!eog) {
        pn = deltafin_detok_push(sl->dt, id, &piece);
        if (pn < 0) pn = 0;
    }
    pthread_mutex_lock(&s->mu);
    if (eog) { finish_locked(s, sl, "stop", 0, NULL); pthread_mutex_unlock(&s->mu); return false; }
    j->n_gen++;
    if (j->req.logprobs) {
        if (j->n_rec == j->cap_rec) {
            int nc = j->cap_rec ? j->cap_rec * 2 : 64;
            tokrec *nr = realloc(j->recs, sizeof(tokrec) * (size_t)nc);
            if (nr) { j->recs = nr; j->cap_rec = nc; }
        }
        if (j->n_rec < j->cap_rec) j->recs[j->n_rec++] = rec;
    }
    bool stop = hn > 0 && job_append(j, held, (size_t)hn);
    if (!stop) stop = job_append(j, piece, (size_t)pn);
    pthread_cond_broadcast(&j->cv);
    if (stop) deltafin_detok_reset(sl->dt); /* what it held came after the stop string */
    if (stop) { j->stop_word = true; finish_locked(s, sl, "stop", 0, NULL); pthread_mutex_unlock(&s->mu); return false; }
    if (df_srv_agent_done(&j->ag)) { /* the grammar is complete: only the end could follow */
        finish_locked(s, sl, "stop", 0, NULL);
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    if ((j->max_tokens >= 0 && j->n_gen >= j->max_tokens) || sl->n_cache >= s->n_ctx) {
        finish_locked(s, sl, "length", 0, NULL);
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    pthread_mutex_unlock(&s->mu);
    sl->next_id = id;
    sl->pending = true;
    return true;
}

/* under mu: slot sl's tokens of this step are in its KV cache */
static void slot_decoded_locked(df_server *s, slot *sl, const deltafin_batch_seq *b) {
    (void)s;
    memcpy(sl->cache + sl->n_cache, b->ids, sizeof(int32_t) * (size_t)b->n);
    sl->n_cache += b->n;
    if (sl->phase == 0 && sl->n_cache == sl->j->n_prompt) sl->phase = 1;
    sl->pending = false;
    slot_snapshot_locked(sl);
}

/* under mu: slot sl's decode failed with rc */
static void slot_failed_locked(df_server *s, slot *sl, int rc) {
    sl->n_cache = deltafin_ctx_pos(sl->ctx);
    if (rc == DELTAFIN_ERR_CANCELLED || atomic_load(&sl->j->cancel)) finish_locked(s, sl, "cancelled", 0, NULL);
    else finish_locked(s, sl, "error", 500, deltafin_errmsg());
}

/* the step's slots: generating ones (one token each), then prompt chunks within the budget */
static int step_build(df_server *s) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->j) continue;
        if (sl->j->req.kind == DF_SRV_EMBED) { slot_embed(s, sl); continue; } /* on its own: no logits */
        if (!sl->started && !slot_start(s, sl)) continue;
        if (sl->phase != 1 || !slot_sample(s, sl)) continue;
        s->step_seqs[n] = (deltafin_batch_seq){sl->ctx, &sl->next_id, 1, false};
        s->step_slot[n++] = i;
    }
    const int n_dec = n;
    int prompt_tok = 0, first = -1;
    for (int k = 0; k < s->n_slots; k++) {
        const int i = (s->rr + k) % s->n_slots;
        slot *sl = &s->slots[i];
        if (!sl->j || !sl->started || sl->phase != 0 || sl->j->req.kind == DF_SRV_EMBED) continue; /* n > 1: a choice that ended in this step starts in the next */
        int chunk = sl->j->n_prompt - sl->n_cache;
        if (chunk > s->chunk) chunk = s->chunk;
        /* within the budget and one pass (a slot's n_batch) */
        if (first >= 0 && (prompt_tok + chunk > s->step_prompt || n_dec + prompt_tok + chunk > s->cap)) continue;
        if (first < 0) first = i;
        s->step_seqs[n] = (deltafin_batch_seq){sl->ctx, sl->j->prompt + sl->n_cache, chunk, false};
        s->step_slot[n++] = i;
        prompt_tok += chunk;
    }
    if (first >= 0) s->rr = (first + 1) % s->n_slots; /* the next step starts with the next prompt */
    return n;
}

static void step_log_locked(df_server *s, bool force) {
    const uint64_t now = deltafin_time_ns();
    if (!s->p.verbose || !s->v_steps || (!force && now - s->v_t0 < 10000000000ull)) return;
    deltafin_log(DELTAFIN_LOG_INFO,
                 "batch: %llu steps, %.2f slots/step, %llu tokens; routed experts %llu acquired for %llu alone "
                 "(%.0f%% saved)",
                 (unsigned long long)s->v_steps, (double)s->v_seqs / (double)s->v_steps,
                 (unsigned long long)s->v_tokens, (unsigned long long)s->v_union, (unsigned long long)s->v_alone,
                 s->v_alone ? 100.0 * (double)(s->v_alone - s->v_union) / (double)s->v_alone : 0.0);
    s->v_steps = s->v_seqs = s->v_tokens = s->v_union = s->v_alone = 0;
    s->v_t0 = now;
}

/* One step: build, decode as one batch, publish. Without the lock. When the batch fails
 * (every slot is then as before the step), slots whose job was cancelled end; if the failure
 * was not their cancellation, the others decode one by one so an error ends only its own
 * slot; otherwise they run again in the next step with the same tokens. */
static void sched_step(df_server *s) {
    const int n = step_build(s);
    if (n == 0) return;
    deltafin_batch_info info;
    const uint64_t t0 = deltafin_time_ns();
    int rc = deltafin_decode_batch(s->step_seqs, n, &info);
    const uint64_t dt = deltafin_time_ns() - t0;
    pthread_mutex_lock(&s->mu);
    if (rc == DELTAFIN_OK) {
        for (int i = 0; i < n; i++) slot_decoded_locked(s, &s->slots[s->step_slot[i]], &s->step_seqs[i]);
        s->m_steps++; s->v_steps++;
        s->m_step_seqs += (uint64_t)n; s->v_seqs += (uint64_t)n;
        s->m_step_tokens += (uint64_t)info.n_tokens; s->v_tokens += (uint64_t)info.n_tokens;
        if ((uint64_t)n > s->m_step_max) s->m_step_max = (uint64_t)n;
        s->m_passes += (uint64_t)info.n_passes;
        s->m_seq_passes += (uint64_t)info.n_seq_passes;
        s->m_exp_union += info.expert_acquires; s->v_union += info.expert_acquires;
        s->m_exp_alone += info.expert_acquires_alone; s->v_alone += info.expert_acquires_alone;
        s->m_step_ns += dt;
        step_log_locked(s, false);
        pthread_mutex_unlock(&s->mu);
        return;
    }
    bool by_cancel = false;
    for (int i = 0; i < n; i++) {
        slot *sl = &s->slots[s->step_slot[i]];
        if (atomic_load(&sl->j->cancel)) { by_cancel = true; slot_failed_locked(s, sl, DELTAFIN_ERR_CANCELLED); s->step_slot[i] = -1; }
    }
    pthread_mutex_unlock(&s->mu);
    if (by_cancel && rc == DELTAFIN_ERR_CANCELLED) return; /* the rest runs in the next step */
    for (int i = 0; i < n; i++) {
        if (s->step_slot[i] < 0) continue;
        slot *sl = &s->slots[s->step_slot[i]];
        const deltafin_batch_seq *b = &s->step_seqs[i];
        int r = n == 1 ? rc : deltafin_decode(b->ctx, b->ids, b->n, false);
        pthread_mutex_lock(&s->mu);
        if (r == DELTAFIN_OK) slot_decoded_locked(s, sl, b);
        else slot_failed_locked(s, sl, r);
        pthread_mutex_unlock(&s->mu);
    }
}

static void *sched_main(void *arg) {
    df_server *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        /* hand queued jobs to free slots: the one whose cache shares the longest prefix */
        while (s->q_head) {
            int best = -1, best_len = -1;
            for (int i = 0; i < s->n_slots; i++) {
                if (s->slots[i].j) continue;
                int l = common_prefix(s->slots[i].cache, s->slots[i].n_cache, s->q_head->prompt, s->q_head->n_prompt);
                if (l > best_len || (l == best_len && s->slots[i].last_used < s->slots[best].last_used)) { best = i; best_len = l; }
            }
            if (best < 0) break;
            job *j = s->q_head;
            s->q_head = j->next;
            if (!s->q_head) s->q_tail = NULL;
            s->q_len--;
            slot *sl = &s->slots[best];
            sl->j = j;
            sl->phase = 0;
            sl->started = false;
            j->slot = best;
            j->state = J_ACTIVE;
            j->t_start = deltafin_time_ns();
        }
        int active = 0;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->j && atomic_load(&sl->j->cancel)) finish_locked(s, sl, "cancelled", 0, NULL);
            active += sl->j != NULL;
        }
        if (!active) {
            step_log_locked(s, true);
            if (atomic_load(&s->stopping)) break;
            pthread_cond_wait(&s->sched_cv, &s->mu);
            continue;
        }
        /* jobs finished since the last trim: give the heap pages their requests freed back (at
         * most every 100 ms). The connection threads allocate from up to 8 glibc arenas per
         * core; without this, pages freed in them stay resident and the RSS creeps up for
         * minutes under load (scripts/load_test_mem.sh) although nothing is leaked. */
        const uint64_t now = deltafin_time_ns();
        const bool trim = s->n_finished != s->n_trimmed && now - s->t_trim > 100000000ull;
        if (trim) { s->n_trimmed = s->n_finished; s->t_trim = now; }
        pthread_mutex_unlock(&s->mu);
        if (trim) malloc_trim(0);
        sched_step(s);
        pthread_mutex_lock(&s->mu);
    }
    /* cancel whatever is still queued */
    while (s->q_head) {
        job *j = s->q_head;
        s->q_head = j->next;
        j->finish = "cancelled";
        j->err_status = 503;
        snprintf(j->err_msg, sizeof j->err_msg, "server is shutting down");
        j->state = J_DONE;
        pthread_cond_broadcast(&j->cv);
        df_srv_job_unref_locked(j);
    }
    s->q_tail = NULL;
    s->q_len = 0;
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- HTTP helpers ------------------------------------------------------------------------- */

typedef struct {
    df_server *s;
    char *body;
    size_t len, cap;
    bool too_big;
    int status;                   /* last status sent (for the log) */
} conn;

static enum MHD_Result send_str(df_server *s, struct MHD_Connection *c, int status, const char *ctype, char *body) {
    if (!body) { body = strdup("{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"code\":null}}"); status = 500; }
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(body); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", ctype);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    pthread_mutex_lock(&s->mu);
    if (status >= 400) s->m_errors++;
    if (status == 429 || status == 503) s->m_rejected++;
    pthread_mutex_unlock(&s->mu);
    return ret;
}

static enum MHD_Result send_json(df_server *s, struct MHD_Connection *c, int status, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return send_str(s, c, status, "application/json", t);
}

static enum MHD_Result send_err(df_server *s, struct MHD_Connection *c, const df_srv_error *e) {
    return send_str(s, c, e->status, "application/json", df_srv_error_json(e));
}

static enum MHD_Result send_error(df_server *s, struct MHD_Connection *c, int status, const char *type,
                                  const char *code, const char *msg) {
    df_srv_error e;
    df_srv_set_error(&e, status, type, code, "%s", msg);
    return send_err(s, c, &e);
}

static int conn_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? (int)ci->connect_fd : -1;
}

/* --timeout is MHD's idle timeout: it guards against clients that stall while sending a request
 * or sit idle on a keep-alive connection, but MHD also counts the time our handler or stream
 * reader spends waiting for a slot or the next token as idle, and closes the connection (a
 * queued stream got its 200 headers and then nothing). While the server owns a request the
 * timeout is off; putting it back restarts MHD's timer. */
void df_srv_conn_timeout(df_server *s, struct MHD_Connection *c, bool on) {
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, on ? (unsigned int)s->p.timeout_s : 0u);
}

bool df_srv_peer_closed(int fd) {
    if (fd < 0) return false;
    struct pollfd pf = {.fd = fd, .events = POLLIN | POLLRDHUP};
    if (poll(&pf, 1, 0) <= 0) return false;
    if (pf.revents & (POLLHUP | POLLERR | POLLRDHUP | POLLNVAL)) return true;
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return true;
    if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return true;
    return false;
}

void df_srv_timed_wait(pthread_cond_t *cv, pthread_mutex_t *mu, int ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)ms * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

/* ---- endpoints ---------------------------------------------------------------------------- */

static bool auth_ok(df_server *s, struct MHD_Connection *c) {
    if (!s->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h) return false;
    if (strncasecmp(h, "Bearer ", 7)) return false;
    h += 7;
    while (*h == ' ') h++;
    /* constant-time compare */
    size_t a = strlen(h), b = strlen(s->api_key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a && i < b; i++) diff |= (unsigned)(h[i] ^ s->api_key[i]);
    return diff == 0;
}

static enum MHD_Result ep_health(df_server *s, struct MHD_Connection *c) {
    if (atomic_load(&s->draining))
        return send_error(s, c, 503, "unavailable_error", "shutting_down", "server is shutting down");
    if (!atomic_load(&s->ready))
        return send_error(s, c, 503, "unavailable_error", "loading", "Loading model");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "status", "ok");
    return send_json(s, c, 200, o);
}

static enum MHD_Result ep_models(df_server *s, struct MHD_Connection *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *d = cJSON_AddArrayToObject(o, "data"), *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "id", s->model_id);
    cJSON_AddStringToObject(e, "object", "model");
    cJSON_AddNumberToObject(e, "created", (double)time(NULL));
    cJSON_AddStringToObject(e, "owned_by", SERVED_OBJECT_OWNER);
    if (s->m) {
        cJSON *meta = cJSON_AddObjectToObject(e, "meta");
        cJSON_AddStringToObject(meta, "arch", deltafin_model_arch(s->m));
        cJSON_AddNumberToObject(meta, "n_vocab", s->n_vocab);
        cJSON_AddNumberToObject(meta, "n_ctx", s->n_ctx);
        cJSON_AddNumberToObject(meta, "n_ctx_train", deltafin_model_n_ctx_train(s->m));
    }
    cJSON_AddItemToArray(d, e);
    return send_json(s, c, 200, o);
}

/* llama-server's /props and /slots (what its web UI and clients read) */
static enum MHD_Result ep_props(df_server *s, struct MHD_Connection *c) {
    const char *tmpl = s->tmpl_src;
    if (!tmpl && s->m) tmpl = deltafin_model_meta_str(s->m, "tokenizer.chat_template");
    df_srv_props pr = {s->model_id, s->model_path, tmpl, s->n_slots, s->n_ctx, s->p.default_max_tokens,
                       s->m ? deltafin_model_n_ctx_train(s->m) : 0, s->n_vocab};
    return send_json(s, c, 200, df_srv_props_json(&pr));
}

static enum MHD_Result ep_slots(df_server *s, struct MHD_Connection *c) {
    cJSON *a = cJSON_CreateArray();
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        const slot *sl = &s->slots[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", i);
        cJSON_AddNumberToObject(o, "n_ctx", s->n_ctx);
        cJSON_AddBoolToObject(o, "is_processing", sl->j != NULL);
        cJSON_AddNumberToObject(o, "n_cached", sl->n_cache);
        if (sl->j) {
            cJSON_AddStringToObject(o, "id_task", sl->j->id);
            cJSON_AddNumberToObject(o, "n_prompt_tokens", sl->j->n_prompt);
            cJSON_AddNumberToObject(o, "n_decoded", sl->j->n_gen + sl->j->n_gen_done);
        }
        cJSON_AddItemToArray(a, o);
    }
    pthread_mutex_unlock(&s->mu);
    return send_json(s, c, 200, a);
}

static enum MHD_Result ep_metrics(df_server *s, struct MHD_Connection *c) {
    size_t cap = 16384, n = 0;
    char *b = malloc(cap);
    if (!b) return MHD_NO;
    uint64_t ph = 0, pm = 0, br = 0, pns = 0, gns = 0, pt = 0, gt = 0;
    pthread_mutex_lock(&s->mu);
    int processing = 0;
    for (int i = 0; i < s->n_slots; i++) {
        const deltafin_stats *st = &s->slots[i].st;
        /* the expert store is shared by the slots: its counters are model-wide, so take the
         * newest (largest) snapshot rather than a sum */
        if (st->expert_hits > ph) ph = st->expert_hits;
        if (st->expert_misses > pm) pm = st->expert_misses;
        if (st->bytes_read > br) br = st->bytes_read;
        pns += st->prompt_ns; gns += st->gen_ns; pt += st->n_prompt_tokens; gt += st->n_gen_tokens;
        processing += s->slots[i].j != NULL;
    }
#define M(type, name, help, fmt, val)                                                               \
    n += (size_t)snprintf(b + n, cap - n, "# HELP deltafin_%s %s\n# TYPE deltafin_%s %s\ndeltafin_%s " fmt "\n", \
                          name, help, name, type, name, val)
    M("counter", "requests_total", "HTTP requests received", "%llu", (unsigned long long)s->m_requests);
    M("counter", "requests_errors_total", "HTTP responses with status >= 400", "%llu", (unsigned long long)s->m_errors);
    M("counter", "requests_rejected_total", "requests refused with 429/503 (queue full, loading, draining)", "%llu", (unsigned long long)s->m_rejected);
    M("counter", "completions_total", "generations finished", "%llu", (unsigned long long)s->m_completed);
    M("counter", "completions_cancelled_total", "generations stopped by a client disconnect or shutdown", "%llu", (unsigned long long)s->m_cancelled);
    M("counter", "prompt_tokens_total", "prompt tokens of all requests", "%llu", (unsigned long long)s->m_prompt_tokens);
    M("counter", "prompt_tokens_cached_total", "prompt tokens reused from a slot's KV cache", "%llu", (unsigned long long)s->m_cached_tokens);
    M("counter", "prompt_tokens_processed_total", "prompt tokens decoded", "%llu", (unsigned long long)pt);
    M("counter", "tokens_generated_total", "generated tokens", "%llu", (unsigned long long)s->m_gen_tokens);
    M("gauge", "prompt_tokens_per_second", "prompt throughput of the decode steps", "%.3f", pns ? pt / (pns / 1e9) : 0.0);
    M("gauge", "generation_tokens_per_second", "generation throughput of the decode steps", "%.3f", gns ? gt / (gns / 1e9) : 0.0);
    M("gauge", "requests_processing", "requests holding a slot", "%d", processing);
    M("gauge", "requests_queued", "requests waiting for a slot", "%d", s->q_len);
    M("gauge", "slots", "parallel slots", "%d", s->n_slots);
    M("counter", "expert_cache_hits_total", "routed-expert cache hits", "%llu", (unsigned long long)ph);
    M("counter", "expert_cache_misses_total", "routed-expert cache misses", "%llu", (unsigned long long)pm);
    M("counter", "bytes_read_total", "bytes read from disk for routed experts", "%llu", (unsigned long long)br);
    M("counter", "batch_steps_total", "scheduler steps (one multi-slot batch each)", "%llu", (unsigned long long)s->m_steps);
    M("counter", "batch_slots_total", "slots decoded, summed over the steps (/ steps = mean batch size)", "%llu",
      (unsigned long long)s->m_step_seqs);
    M("counter", "batch_tokens_total", "tokens decoded by the steps", "%llu", (unsigned long long)s->m_step_tokens);
    M("gauge", "batch_slots_max", "most slots in one step", "%llu", (unsigned long long)s->m_step_max);
    M("counter", "batch_passes_total", "forward passes (each reads every dense layer once)", "%llu",
      (unsigned long long)s->m_passes);
    M("counter", "batch_slot_passes_total", "forward passes separate per-slot decodes would have run", "%llu",
      (unsigned long long)s->m_seq_passes);
    M("counter", "batch_experts_acquired_total", "routed experts acquired by the steps (the union per layer)", "%llu",
      (unsigned long long)s->m_exp_union);
    M("counter", "batch_experts_alone_total", "routed experts separate per-slot decodes would have acquired", "%llu",
      (unsigned long long)s->m_exp_alone);
    M("counter", "batch_experts_saved_total", "expert acquires saved by sharing (alone - acquired)", "%llu",
      (unsigned long long)(s->m_exp_alone - s->m_exp_union));
    M("gauge", "batch_tokens_per_second", "tokens of all slots together per second of decode steps", "%.3f",
      s->m_step_ns ? s->m_step_tokens / (s->m_step_ns / 1e9) : 0.0);
    pthread_mutex_unlock(&s->mu);
    M("gauge", "memory_rss_bytes", "resident set size", "%llu", (unsigned long long)deltafin_cur_rss());
    M("gauge", "memory_peak_rss_bytes", "peak resident set size", "%llu", (unsigned long long)deltafin_peak_rss());
#undef M
    if (n >= cap) n = cap - 1;
    b[n] = 0;
    return send_str(s, c, 200, "text/plain; version=0.0.4", b);
}

static enum MHD_Result ep_tokenize(df_server *s, struct MHD_Connection *c, conn *cn, int kind) {
    df_srv_req r;
    df_srv_error e;
    if (df_srv_parse(kind, cn->body, cn->len, NULL, &r, &e)) return send_err(s, c, &e);
    cJSON *o = cJSON_CreateObject();
    if (kind == DF_SRV_TOKENIZE) {
        size_t len = strlen(r.content);
        int n = deltafin_tokenize(s->m, r.content, len, r.add_special, r.parse_special, NULL, 0);
        int32_t *ids = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
        if (n > 0 && ids) n = deltafin_tokenize(s->m, r.content, len, r.add_special, r.parse_special, ids, n);
        cJSON *a = cJSON_AddArrayToObject(o, "tokens");
        for (int i = 0; ids && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(ids[i]));
        free(ids);
        if (n < 0) {
            cJSON_Delete(o);
            df_srv_req_free(&r);
            return send_error(s, c, 400, "invalid_request_error", "tokenize_failed", deltafin_errmsg());
        }
    } else {
        size_t cap = 64, len = 0;
        char *t = malloc(cap);
        for (int i = 0; t && i < r.n_prompt_ids; i++) {
            if (r.prompt_ids[i] >= s->n_vocab) {
                free(t);
                cJSON_Delete(o);
                df_srv_error er;
                df_srv_set_error(&er, 400, "invalid_request_error", "invalid_token", "token id %d is outside the vocabulary (%d tokens)", r.prompt_ids[i], s->n_vocab);
                df_srv_req_free(&r);
                return send_err(s, c, &er);
            }
            char piece[512];
            int n = deltafin_token_to_piece(s->m, r.prompt_ids[i], false, piece, (int)sizeof piece);
            if (n < 0 || n > (int)sizeof piece) continue;
            if (len + (size_t)n + 1 > cap) {
                cap = (len + (size_t)n + 1) * 2;
                char *nt = realloc(t, cap);
                if (!nt) { free(t); t = NULL; break; }
                t = nt;
            }
            memcpy(t + len, piece, (size_t)n);
            len += (size_t)n;
        }
        char *san = t ? df_srv_utf8_sanitize(t, len) : NULL;
        cJSON_AddStringToObject(o, "content", san ? san : "");
        free(san);
        free(t);
    }
    df_srv_req_free(&r);
    return send_json(s, c, 200, o);
}

/* prompt ids of a request (chat: rendered with the chat template), or an error */
/* embeddings: each input's tokens (a text is tokenized with BOS, as llama-server does) */
static int embed_inputs(df_server *s, job *j, df_srv_error *e) {
    const df_srv_ext *x = &j->req.x;
    j->ein = calloc((size_t)x->n_inputs, sizeof *j->ein);
    j->ein_n = calloc((size_t)x->n_inputs, sizeof *j->ein_n);
    j->n_embd = deltafin_model_n_embd(s->m);
    j->embd = malloc(sizeof(float) * (size_t)x->n_inputs * (size_t)j->n_embd);
    if (!j->ein || !j->ein_n || !j->embd) return df_srv_set_error(e, 500, "server_error", "out_of_memory", "out of memory");
    j->n_ein = x->n_inputs;
    for (int i = 0; i < x->n_inputs; i++) {
        int n;
        if (x->input_text[i]) {
            const char *t = x->input_text[i];
            n = deltafin_tokenize(s->m, t, strlen(t), true, false, NULL, 0);
            if (n > 0 && !(j->ein[i] = malloc(sizeof(int32_t) * (size_t)n)))
                return df_srv_set_error(e, 500, "server_error", "out_of_memory", "out of memory");
            if (n > 0) n = deltafin_tokenize(s->m, t, strlen(t), true, false, j->ein[i], n);
            if (n < 0) return df_srv_set_error(e, 400, "invalid_request_error", "tokenize_failed", "cannot tokenize 'input'[%d]: %s", i, deltafin_errmsg());
        } else {
            n = x->input_n[i];
            for (int k = 0; k < n; k++)
                if (x->input_ids[i][k] >= s->n_vocab)
                    return df_srv_set_error(e, 400, "invalid_request_error", "invalid_token", "'input'[%d] token id %d is outside the vocabulary (%d tokens)", i, x->input_ids[i][k], s->n_vocab);
            if (!(j->ein[i] = malloc(sizeof(int32_t) * (size_t)n))) return df_srv_set_error(e, 500, "server_error", "out_of_memory", "out of memory");
            memcpy(j->ein[i], x->input_ids[i], sizeof(int32_t) * (size_t)n);
        }
        if (n <= 0) return df_srv_set_error(e, 400, "invalid_request_error", "empty_prompt", "'input'[%d] is empty after tokenization", i);
        if (n > s->n_ctx)
            return df_srv_set_error(e, 400, "invalid_request_error", "context_length_exceeded", "'input'[%d] has %d tokens but the context holds %d", i, n, s->n_ctx);
        j->ein_n[i] = n;
        j->n_ein_tok += n;
    }
    return 0;
}

static int build_prompt(df_server *s, job *j, df_srv_error *e) {
    df_srv_req *r = &j->req;
    if (r->kind == DF_SRV_EMBED) return embed_inputs(s, j, e);
    df_srv_agent_ctx ax = {s->chat_template, s->tmpl_src, NULL, s->grammar};
    if (r->prompt_ids) {
        for (int i = 0; i < r->n_prompt_ids; i++)
            if (r->prompt_ids[i] >= s->n_vocab)
                return df_srv_set_error(e, 400, "invalid_request_error", "invalid_token", "prompt token id %d is outside the vocabulary (%d tokens)", r->prompt_ids[i], s->n_vocab);
        j->prompt = r->prompt_ids;
        j->n_prompt = r->n_prompt_ids;
        r->prompt_ids = NULL;
        return df_srv_agent_prepare(&j->ag, s->m, r, &ax, e);
    }
    char *rendered = NULL;
    const char *text = r->prompt;
    if (r->kind == DF_SRV_CHAT) {
        int rc = s->tmpl_src ? deltafin_chat_render_template(s->m, s->tmpl_src, r->msgs, r->n_msgs, r->tools_json, true, &rendered)
                             : deltafin_chat_render(s->m, s->chat_template, r->msgs, r->n_msgs, r->tools_json, true, &rendered);
        if (rc < 0)
            return df_srv_set_error(e, 400, "invalid_request_error", "template_error", "cannot render the chat template: %s", deltafin_errmsg());
        text = rendered;
    }
    size_t len = strlen(text);
    int n = deltafin_tokenize(s->m, text, len, true, true, NULL, 0);
    if (n > 0) {
        j->prompt = malloc(sizeof(int32_t) * (size_t)n);
        if (!j->prompt) { free(rendered); return df_srv_set_error(e, 500, "server_error", "out_of_memory", "out of memory"); }
        n = deltafin_tokenize(s->m, text, len, true, true, j->prompt, n);
    }
    ax.prompt = rendered;
    int st = n < 0 ? 0 : df_srv_agent_prepare(&j->ag, s->m, r, &ax, e);
    free(rendered);
    if (st) return st;
    if (n < 0) return df_srv_set_error(e, 400, "invalid_request_error", "tokenize_failed", "cannot tokenize the prompt: %s", deltafin_errmsg());
    /* a template that writes the BOS text itself + a tokenizer that adds BOS: keep one */
    int32_t bos = deltafin_token_bos(s->m);
    if (n >= 2 && bos >= 0 && j->prompt[0] == bos && j->prompt[1] == bos) {
        memmove(j->prompt, j->prompt + 1, sizeof(int32_t) * (size_t)(n - 1));
        n--;
    }
    j->n_prompt = n;
    if (n <= 0) return df_srv_set_error(e, 400, "invalid_request_error", "empty_prompt", "the prompt is empty after tokenization");
    return 0;
}

static enum MHD_Result ep_generate(df_server *s, struct MHD_Connection *c, conn *cn, int kind) {
    df_srv_limits lim = {.max_tokens_limit = s->n_ctx, .defaults = &s->sampling};
    df_srv_error e;
    job *j = calloc(1, sizeof *j);
    if (!j) return MHD_NO;
    if (df_srv_parse(kind, cn->body, cn->len, &lim, &j->req, &e)) { free(j); return send_err(s, c, &e); }
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->slot = -1;
    atomic_init(&j->cancel, 0);
    if (!df_srv_model_ok(j->req.model, s->model_id)) {
        df_srv_set_error(&e, 404, "invalid_request_error", "model_not_found",
                         "The model '%.100s' does not exist (this server serves '%.100s')", j->req.model, s->model_id);
        goto fail;
    }
    if (build_prompt(s, j, &e)) goto fail;
    j->n_choices = j->req.x.n;
    if (j->n_choices > 1 && !(j->outs = calloc((size_t)j->n_choices, sizeof *j->outs))) {
        df_srv_set_error(&e, 500, "server_error", "out_of_memory", "out of memory");
        goto fail;
    }
    if (kind != DF_SRV_EMBED && j->n_prompt >= s->n_ctx) {
        df_srv_set_error(&e, 400, "invalid_request_error", "context_length_exceeded",
                         "the prompt has %d tokens but the context holds %d (including at least one generated token)",
                         j->n_prompt, s->n_ctx);
        goto fail;
    }
    j->max_tokens = j->req.max_tokens == -2 ? s->p.default_max_tokens : j->req.max_tokens;
    j->t_submit = deltafin_time_ns();
    j->created = (long)time(NULL);
    pthread_mutex_lock(&s->mu);
    if (atomic_load(&s->draining)) {
        pthread_mutex_unlock(&s->mu);
        df_srv_set_error(&e, 503, "unavailable_error", "shutting_down", "server is shutting down");
        goto fail;
    }
    /* a queued job waits for the scheduler to hand it a free slot; until then it must not
     * count against the queue, or a burst is refused while slots sit idle (the scheduler
     * may be in the middle of a step when the requests arrive) */
    int n_free = 0;
    for (int i = 0; i < s->n_slots; i++) n_free += s->slots[i].j == NULL;
    if (s->q_len >= s->p.n_queue + n_free) {
        int ql = s->q_len - n_free > 0 ? s->q_len - n_free : 0;
        pthread_mutex_unlock(&s->mu);
        df_srv_set_error(&e, 429, "rate_limit_error", "queue_full",
                         "server busy: %d requests already waiting for %d slots, retry later", ql, s->n_slots);
        goto fail;
    }
    snprintf(j->id, sizeof j->id, "%s-%llx%04x", kind == DF_SRV_CHAT ? "chatcmpl" : kind == DF_SRV_EMBED ? "embd" : "cmpl",
             (unsigned long long)++s->id_counter, (unsigned)(deltafin_time_ns() & 0xffff));
    j->refs = 2; /* connection + scheduler */
    if (s->q_tail) s->q_tail->next = j;
    else s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    pthread_cond_signal(&s->sched_cv);
    int fd = conn_fd(c);
    df_srv_conn_timeout(s, c, false); /* until the answer is complete (streams: the last event) */
    if (j->req.stream && kind != DF_SRV_EMBED) {
        return df_srv_stream_start(s, c, j, fd);
    }
    while (j->state != J_DONE) {
        df_srv_timed_wait(&j->cv, &s->mu, 100);
        if (j->state != J_DONE && (df_srv_peer_closed(fd) || atomic_load(&s->stopping) == 2)) {
            atomic_store(&j->cancel, 1);
            if (j->state == J_ACTIVE && j->slot >= 0) deltafin_ctx_cancel(s->slots[j->slot].ctx);
            pthread_cond_signal(&s->sched_cv);
            df_srv_job_unref_locked(j);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO; /* close the connection */
        }
    }
    df_srv_conn_timeout(s, c, true);
    if (j->err_status) {
        df_srv_set_error(&e, j->err_status, j->err_status == 503 ? "unavailable_error" : "server_error",
                         "generation_failed", "%s", j->err_msg);
        df_srv_job_unref_locked(j);
        pthread_mutex_unlock(&s->mu);
        return send_err(s, c, &e);
    }
    cJSON *o = kind == DF_SRV_EMBED ? df_srv_embed_json(j->embd, j->n_ein, j->n_embd, j->req.x.base64, j->n_ein_tok, s->model_id)
             : j->req.x.native     ? df_srv_native_final(j->text ? j->text : "", j->finish, j->stop_word, j->n_prompt,
                                                         j->n_gen, j->n_cached, s->model_id, j->slot)
                                   : df_srv_final_json(s, j);
    if (o && kind != DF_SRV_EMBED && j->req.x.native && j->req.logprobs && j->n_rec > 0)
        cJSON_AddItemToObject(o, "completion_probabilities", df_srv_token_lps_json(s, j, j->recs, 0, j->n_rec, true));
    if (s->p.verbose)
        deltafin_log(DELTAFIN_LOG_INFO, "%s: prompt %d (cached %d), generated %d, %s, %.1f ms", j->id, j->n_prompt, j->n_cached,
               j->n_gen, j->finish, (j->t_end - j->t_submit) / 1e6);
    df_srv_job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    return send_json(s, c, 200, o);
fail:
    j->refs = 1;
    pthread_mutex_lock(&s->mu);
    df_srv_job_unref_locked(j);
    pthread_mutex_unlock(&s->mu);
    return send_err(s, c, &e);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
    df_server *s = cls;
    conn *cn = *con_cls;
    if (!cn) {
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        cn->s = s;
        *con_cls = cn;
        atomic_fetch_add(&s->n_inflight, 1);
        pthread_mutex_lock(&s->mu);
        s->m_requests++;
        pthread_mutex_unlock(&s->mu);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *endp;
            errno = 0;
            unsigned long long v = strtoull(cl, &endp, 10);
            if (errno || endp == cl || v > s->p.max_body) {
                char msg[128];
                snprintf(msg, sizeof msg, "request body is larger than the limit of %zu bytes", s->p.max_body);
                cn->too_big = true;
                return send_error(s, c, 413, "invalid_request_error", "payload_too_large", msg);
            }
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cn->too_big) return MHD_YES;
        if (cn->len + n > s->p.max_body) { cn->too_big = true; return MHD_YES; }
        if (cn->len + n + 1 > cn->cap) {
            size_t nc = (cn->len + n + 1) * 2;
            if (nc > s->p.max_body + 1) nc = s->p.max_body + 1;
            char *nb = realloc(cn->body, nc);
            if (!nb) { cn->too_big = true; return MHD_YES; }
            cn->body = nb;
            cn->cap = nc;
        }
        memcpy(cn->body + cn->len, upload_data, n);
        cn->len += n;
        cn->body[cn->len] = 0;
        return MHD_YES;
    }
    if (cn->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "request body is larger than the limit of %zu bytes", s->p.max_body);
        return send_error(s, c, 413, "invalid_request_error", "payload_too_large", msg);
    }
    bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/") || !strcmp(url, "/index.html")) { /* the web chat page: no key needed to load it */
        if (!get) return send_error(s, c, 405, "invalid_request_error", "method_not_allowed", "use GET");
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(df_srv_web_page), (void *)df_srv_web_page, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        enum MHD_Result ret = MHD_queue_response(c, 200, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!strcmp(url, "/health") || !strcmp(url, "/v1/health")) {
        if (!get) return send_error(s, c, 405, "invalid_request_error", "method_not_allowed", "use GET");
        return ep_health(s, c);
    }
    if (!strcmp(method, "OPTIONS")) {
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        enum MHD_Result ret = MHD_queue_response(c, 204, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (!auth_ok(s, c))
        return send_error(s, c, 401, "authentication_error", "invalid_api_key", "missing or invalid API key (Authorization: Bearer ...)");
    int kind = 0;
    bool need_post = true;
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/chat/completions")) kind = DF_SRV_CHAT;
    else if (!strcmp(url, "/v1/completions") || !strcmp(url, "/completions")) kind = DF_SRV_COMPLETION;
    else if (!strcmp(url, "/completion")) kind = DF_SRV_LLAMA_COMPLETION;
    else if (!strcmp(url, "/v1/embeddings") || !strcmp(url, "/embeddings") || !strcmp(url, "/embedding")) kind = DF_SRV_EMBED;
    else if (!strcmp(url, "/props")) { kind = 102; need_post = false; }
    else if (!strcmp(url, "/slots")) { kind = 103; need_post = false; }
    else if (!strcmp(url, "/tokenize")) kind = DF_SRV_TOKENIZE;
    else if (!strcmp(url, "/detokenize")) kind = DF_SRV_DETOKENIZE;
    else if (!strcmp(url, "/v1/models") || !strcmp(url, "/models")) { kind = 100; need_post = false; }
    else if (!strcmp(url, "/metrics")) { kind = 101; need_post = false; }
    else {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown endpoint %s %.100s", method, url);
        return send_error(s, c, 404, "invalid_request_error", "not_found", msg);
    }
    if (need_post ? !post : !get)
        return send_error(s, c, 405, "invalid_request_error", "method_not_allowed", need_post ? "use POST" : "use GET");
    if (kind == 100) return ep_models(s, c);
    if (kind == 101) return ep_metrics(s, c);
    if (kind == 102) return ep_props(s, c);
    if (kind == 103) return ep_slots(s, c);
    if (atomic_load(&s->draining))
        return send_error(s, c, 503, "unavailable_error", "shutting_down", "server is shutting down");
    if (!atomic_load(&s->ready))
        return send_error(s, c, 503, "unavailable_error", "loading", "Loading model");
    if (kind == DF_SRV_TOKENIZE || kind == DF_SRV_DETOKENIZE) return ep_tokenize(s, c, cn, kind);
    return ep_generate(s, c, cn, kind);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    conn *cn = *con_cls;
    if (!cn) return;
    atomic_fetch_sub(&cn->s->n_inflight, 1);
    free(cn->body);
    free(cn);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap) {
    df_server *s = cls;
    if (!s->p.verbose) return;
    char b[512];
    vsnprintf(b, sizeof b, fmt, ap);
    size_t n = strlen(b);
    while (n && (b[n - 1] == '\n')) b[--n] = 0;
    deltafin_log(DELTAFIN_LOG_INFO, "http: %s", b);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

int df_server_start(const df_server_params *pp, df_server **out) {
    *out = NULL;
    df_server_params p = pp ? *pp : df_server_default_params();
    if (p.n_parallel < 1 || p.n_parallel > 256) return deltafin_set_error(DELTAFIN_ERR_INVALID, "--parallel %d out of range 1..256", p.n_parallel);
    if (p.n_queue < 0) return deltafin_set_error(DELTAFIN_ERR_INVALID, "--queue %d must be >= 0", p.n_queue);
    if (p.step_tokens < 0) return deltafin_set_error(DELTAFIN_ERR_INVALID, "--step-tokens %d must be >= 0", p.step_tokens);
    if (p.port < 0 || p.port > 65535) return deltafin_set_error(DELTAFIN_ERR_INVALID, "--port %d out of range", p.port);
    if (p.max_body < 16) return deltafin_set_error(DELTAFIN_ERR_INVALID, "--max-body too small");
    if (p.timeout_s < 1) p.timeout_s = 1;
    if (p.n_batch <= 0) p.n_batch = 512;
    df_server *s = calloc(1, sizeof *s);
    if (!s) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
    s->host = strdup(p.host ? p.host : "127.0.0.1");
    s->api_key = p.api_key && p.api_key[0] ? strdup(p.api_key) : NULL;
    s->model_id = strdup(p.model_id ? p.model_id : "deltafin");
    s->chat_template = p.chat_template && p.chat_template[0] ? strdup(p.chat_template) : NULL;
    s->tmpl_src = p.chat_template_src && p.chat_template_src[0] ? strdup(p.chat_template_src) : NULL;
    s->model_path = p.model_path ? strdup(p.model_path) : NULL;
    s->grammar = p.default_grammar && p.default_grammar[0] ? strdup(p.default_grammar) : NULL;
    p.chat_template_src = s->tmpl_src; p.model_path = s->model_path; p.default_grammar = s->grammar;
    p.host = s->host; p.api_key = s->api_key; p.model_id = s->model_id; p.chat_template = s->chat_template;
    s->p = p;
    s->sampling = deltafin_sampler_default_params();
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->sched_cv, NULL);
    pthread_cond_init(&s->idle_cv, NULL);

    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, s->host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)p.port);
        sa = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, s->host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)p.port);
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        df_server_free(s);
        return deltafin_set_error(DELTAFIN_ERR_INVALID, "--host '%s' is not an IPv4 or IPv6 address", p.host);
    }
    /* the logger first: libmicrohttpd warns (on stderr, through its own logger) about a logger
     * given after other options */
    s->d = MHD_start_daemon(flags, (uint16_t)p.port, NULL, NULL, on_request, s,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, s,
                            MHD_OPTION_SOCK_ADDR, sa,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)p.timeout_s,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                            MHD_OPTION_CONNECTION_LIMIT, (unsigned int)(p.n_queue + p.n_parallel + 64),
                            MHD_OPTION_END);
    if (!s->d) {
        int en = errno;
        df_server_free(s);
        return deltafin_set_error(DELTAFIN_ERR_IO, "cannot listen on %s:%d (%s)", p.host, p.port, strerror(en));
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : p.port;
    *out = s;
    return DELTAFIN_OK;
}

int df_server_port(const df_server *s) { return s->port; }

void df_server_set_sampling(df_server *s, const deltafin_sampler_params *sp) { s->sampling = *sp; }

int df_server_set_model(df_server *s, deltafin_model *m) {
    if (s->m) return deltafin_set_error(DELTAFIN_ERR_INVALID, "server already has a model");
    s->slots = calloc((size_t)s->p.n_parallel, sizeof *s->slots);
    if (!s->slots) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
    deltafin_ctx_params cp = deltafin_ctx_default_params();
    cp.n_ctx = s->p.n_ctx;
    cp.n_batch = s->p.n_batch;
    cp.n_threads = s->p.n_threads;
    for (int i = 0; i < s->p.n_parallel; i++) {
        int rc = deltafin_ctx_create(m, &cp, &s->slots[i].ctx);
        if (rc < 0) return deltafin_set_error(rc, "slot %d: %s", i, deltafin_errmsg());
        s->n_slots = i + 1;
        rc = deltafin_ctx_set_routing(s->slots[i].ctx, &s->p.routing);
        if (rc < 0) return rc;
        s->slots[i].cache = malloc(sizeof(int32_t) * (size_t)deltafin_ctx_n_ctx(s->slots[i].ctx));
        if (!s->slots[i].cache) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
        s->slots[i].dt = deltafin_detok_create(m, false);
        if (!s->slots[i].dt) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "slot %d: %s", i, deltafin_errmsg());
    }
    s->n_ctx = deltafin_ctx_n_ctx(s->slots[0].ctx);
    s->n_vocab = deltafin_model_n_vocab(m);
    if (s->p.n_batch > s->n_ctx) s->p.n_batch = s->n_ctx;
    s->step_seqs = calloc((size_t)s->n_slots, sizeof *s->step_seqs);
    s->step_slot = calloc((size_t)s->n_slots, sizeof *s->step_slot);
    if (!s->step_seqs || !s->step_slot) return deltafin_set_error(DELTAFIN_ERR_NOMEM, "out of memory");
    /* a step is one pass of at most a slot's n_batch tokens: a prompt chunk leaves room for
     * the other slots' tokens */
    const int cap = s->cap = deltafin_ctx_n_batch(s->slots[0].ctx);
    s->step_prompt = s->p.step_tokens > 0 && s->p.step_tokens < cap ? s->p.step_tokens : cap;
    s->chunk = cap - (s->n_slots - 1);
    if (s->chunk > s->step_prompt) s->chunk = s->step_prompt;
    if (s->chunk < 1) s->chunk = 1;
    s->v_t0 = deltafin_time_ns();
    s->m = m;
    if (pthread_create(&s->sched, NULL, sched_main, s)) return deltafin_set_error(DELTAFIN_ERR_INTERNAL, "cannot start the scheduler thread");
    s->sched_running = true;
    atomic_store(&s->ready, 1);
    return DELTAFIN_OK;
}

void df_server_stop(df_server *s, int drain_ms) {
    if (!s || s->stopped) return;
    s->stopped = true;
    atomic_store(&s->draining, 1);
    if (s->d) MHD_quiesce_daemon(s->d); /* no new connections */
    pthread_mutex_lock(&s->mu);
    uint64_t deadline = deltafin_time_ns() + (uint64_t)(drain_ms > 0 ? drain_ms : 0) * 1000000ull;
    for (;;) {
        bool busy = s->q_len > 0;
        for (int i = 0; i < s->n_slots; i++) busy |= s->slots[i].j != NULL;
        if (!busy || !s->sched_running || deltafin_time_ns() >= deadline) break;
        df_srv_timed_wait(&s->idle_cv, &s->mu, 50);
    }
    /* past the deadline: cancel what is left */
    for (job *j = s->q_head; j; j = j->next) atomic_store(&j->cancel, 1);
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].j) { atomic_store(&s->slots[i].j->cancel, 1); deltafin_ctx_cancel(s->slots[i].ctx); }
    atomic_store(&s->stopping, 1);
    pthread_cond_broadcast(&s->sched_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->sched_running) { pthread_join(s->sched, NULL); s->sched_running = false; }
    /* A finished job's answer is still being written by its connection thread: let in-flight
     * requests complete (same deadline) before MHD_stop_daemon closes their sockets. */
    while (atomic_load(&s->n_inflight) > 0 && deltafin_time_ns() < deadline) usleep(10000);
    atomic_store(&s->stopping, 2); /* blocked connection threads give up */
    if (s->d) { MHD_stop_daemon(s->d); s->d = NULL; }
}

void df_server_free(df_server *s) {
    if (!s) return;
    df_server_stop(s, 0);
    for (int i = 0; i < s->n_slots; i++) {
        deltafin_ctx_free(s->slots[i].ctx);
        free(s->slots[i].cache);
        deltafin_sampler_free(s->slots[i].smp);
        deltafin_detok_free(s->slots[i].dt);
    }
    free(s->slots);
    free(s->step_seqs);
    free(s->step_slot);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->sched_cv);
    pthread_cond_destroy(&s->idle_cv);
    free(s->host);
    free(s->api_key);
    free(s->model_id);
    free(s->chat_template);
    free(s->tmpl_src);
    free(s->model_path);
    free(s->grammar);
    free(s);
}
