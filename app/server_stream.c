/* server_stream.c — the server's answers: the final JSON of a request (choices, logprobs, usage;
 * llama.cpp's completion_probabilities) and server-sent event streams (one libmicrohttpd content
 * reader per streamed request, turning the job's output into events as the scheduler adds it).
 * Everything here reads a job under s->mu (server_impl.h). */
#include "app/server_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *piece_json_bytes(const char *p, int n) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((unsigned char)p[i]));
    return a;
}

/* token text for logprobs (sanitized to valid UTF-8) */
static char *tok_text(df_server *s, int32_t id, char *raw, int *rawn) {
    int n = deltafin_token_to_piece(s->m, id, false, raw, 256);
    if (n < 0 || n > 256) n = 0;
    *rawn = n;
    return df_srv_utf8_sanitize(raw, (size_t)n);
}

static double lp_val(float x) { return isfinite(x) ? (double)x : -9999.0; }

/* the order of r's entries by logprob, best first (the chosen token, entry 0, among them);
 * returns the count */
static int rec_order(const tokrec *r, int *idx) {
    int ni = 0;
    for (int k = 0; k < r->n_top; k++) idx[ni++] = k;
    for (int x = 1; x < ni; x++) /* insertion sort by logprob desc */
        for (int y = x; y > 0 && r->top_lps[idx[y]] > r->top_lps[idx[y - 1]]; y--) {
            int tmp = idx[y]; idx[y] = idx[y - 1]; idx[y - 1] = tmp;
        }
    return ni;
}

/* {"id" (native only), "token", "bytes", "logprob"} of one token */
static cJSON *token_lp_json(df_server *s, int32_t id, float lp, bool with_id) {
    char raw[256];
    int rn;
    cJSON *e = cJSON_CreateObject();
    if (with_id) cJSON_AddNumberToObject(e, "id", id);
    char *t = tok_text(s, id, raw, &rn);
    cJSON_AddStringToObject(e, "token", t ? t : "");
    free(t);
    if (with_id) { /* llama.cpp's order */
        cJSON_AddItemToObject(e, "bytes", piece_json_bytes(raw, rn));
        cJSON_AddNumberToObject(e, "logprob", lp_val(lp));
    } else {
        cJSON_AddNumberToObject(e, "logprob", lp_val(lp));
        cJSON_AddItemToObject(e, "bytes", piece_json_bytes(raw, rn));
    }
    return e;
}

/* per token of recs [a, b): the chosen token and its "top_logprobs", the top_logprobs most
 * likely tokens (the chosen one included if it is one of them); chat's logprobs.content and
 * (with ids) llama.cpp's /completion completion_probabilities */
cJSON *df_srv_token_lps_json(df_server *s, const job *j, const tokrec *recs, int a, int b, bool with_id) {
    cJSON *content = cJSON_CreateArray();
    for (int i = a; i < b; i++) {
        const tokrec *r = &recs[i];
        cJSON *e = token_lp_json(s, r->id, r->lp, with_id);
        cJSON *tops = cJSON_AddArrayToObject(e, "top_logprobs");
        int idx[DF_SRV_MAX_TOP_LOGPROBS + 1], ni = rec_order(r, idx);
        for (int k = 0; k < ni && k < j->req.top_logprobs; k++)
            cJSON_AddItemToArray(tops, token_lp_json(s, r->top_ids[idx[k]], r->top_lps[idx[k]], with_id));
        cJSON_AddItemToArray(content, e);
    }
    return content;
}

/* logprobs object for recs [a, b) */
static cJSON *logprobs_json(df_server *s, const job *j, const tokrec *recs, int a, int b) {
    char raw[256];
    int rn;
    if (j->req.kind == DF_SRV_CHAT) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "content", df_srv_token_lps_json(s, j, recs, a, b, false));
        return o;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    size_t off = 0;
    for (int i = 0; i < b; i++) {
        const tokrec *r = &recs[i];
        char *t = tok_text(s, r->id, raw, &rn);
        if (i >= a) {
            cJSON_AddItemToArray(toks, cJSON_CreateString(t ? t : ""));
            cJSON_AddItemToArray(lps, cJSON_CreateNumber(lp_val(r->lp)));
            cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
            cJSON *m = cJSON_CreateObject();
            int idx[DF_SRV_MAX_TOP_LOGPROBS + 1], ni = rec_order(r, idx);
            for (int k = 0, added = 0; k < ni && added < j->req.top_logprobs; k++) {
                char tmp[256];
                int tn;
                char *tt = tok_text(s, r->top_ids[idx[k]], tmp, &tn);
                if (tt && !cJSON_GetObjectItemCaseSensitive(m, tt)) {
                    cJSON_AddNumberToObject(m, tt, lp_val(r->top_lps[idx[k]]));
                    added++;
                }
                free(tt);
            }
            cJSON_AddItemToArray(tops, m);
        }
        off += (size_t)rn;
        free(t);
    }
    return o;
}

static cJSON *usage_json(const job *j) {
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", j->n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", j->n_gen + j->n_gen_done);
    cJSON_AddNumberToObject(u, "total_tokens", j->n_prompt + j->n_gen + j->n_gen_done);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", j->n_cached);
    return u;
}

static cJSON *response_head(df_server *s, const job *j, const char *object) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)j->created);
    cJSON_AddStringToObject(o, "model", s->model_id);
    cJSON_AddStringToObject(o, "system_fingerprint", "deltafin-" DELTAFIN_VERSION);
    return o;
}

/* choice i of a job: the finished ones are in j->outs, the last one in the job itself */
typedef struct {
    const char *text;
    size_t len;
    const tokrec *recs;
    int n_rec;
    const char *finish;
} choice_view;

static choice_view job_choice(const job *j, int i) {
    choice_view v;
    if (j->outs && i < j->choice) {
        const choice_out *o = &j->outs[i];
        v = (choice_view){o->text ? o->text : "", o->len, o->recs, o->n_rec, o->finish};
    } else {
        v = (choice_view){j->text ? j->text : "", j->len, j->recs, j->n_rec, j->finish ? j->finish : "stop"};
    }
    return v;
}

/* full (non-streamed) response, under mu */
cJSON *df_srv_final_json(df_server *s, job *j) {
    bool chat = j->req.kind == DF_SRV_CHAT;
    cJSON *o = response_head(s, j, chat ? "chat.completion" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices");
    for (int i = 0; i < (j->n_choices > 0 ? j->n_choices : 1); i++) {
        choice_view v = job_choice(j, i);
        cJSON *c0 = cJSON_CreateObject();
        cJSON_AddItemToArray(ch, c0);
        cJSON_AddNumberToObject(c0, "index", i);
        const char *finish = v.finish;
        if (chat && j->ag.parse) {
            cJSON_AddItemToObject(c0, "message", df_srv_agent_message(&j->ag, v.text, v.len, &finish));
        } else if (chat) {
            cJSON *msg = cJSON_AddObjectToObject(c0, "message");
            cJSON_AddStringToObject(msg, "role", "assistant");
            cJSON_AddStringToObject(msg, "content", v.text);
        } else {
            cJSON_AddStringToObject(c0, "text", v.text);
        }
        if (j->req.logprobs) cJSON_AddItemToObject(c0, "logprobs", logprobs_json(s, j, v.recs, 0, v.n_rec));
        else cJSON_AddNullToObject(c0, "logprobs");
        cJSON_AddStringToObject(c0, "finish_reason", finish);
    }
    cJSON_AddItemToObject(o, "usage", usage_json(j));
    return o;
}

/* ---- streaming ---------------------------------------------------------------------------- */

typedef struct {
    df_server *s;
    job *j;
    struct MHD_Connection *c;
    int fd;
    char *out;
    size_t out_len, out_pos, out_cap;
    int choice;                   /* the choice being streamed (n > 1: one after another) */
    size_t sent;                  /* of its text */
    int rec_sent;
    df_srv_agent_sent asent;      /* parsed output sent (tool calls, reasoning) */
    bool role_sent, finished;
} stream_st;

static void out_add(stream_st *ss, const char *a, size_t n) {
    if (ss->out_len + n + 1 > ss->out_cap) {
        size_t nc = (ss->out_len + n + 1) * 2;
        char *no = realloc(ss->out, nc);
        if (!no) return;
        ss->out = no;
        ss->out_cap = nc;
    }
    memcpy(ss->out + ss->out_len, a, n);
    ss->out_len += n;
}

static void out_event(stream_st *ss, cJSON *o) {
    char *t = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!t) return;
    out_add(ss, "data: ", 6);
    out_add(ss, t, strlen(t));
    out_add(ss, "\n\n", 2);
    free(t);
}

/* a chunk of choice ss->choice; delta (chat, may be NULL) is taken over */
static cJSON *chunk_json(stream_st *ss, cJSON *delta, const char *text, const tokrec *recs, int rec_a, int rec_b,
                         const char *finish) {
    df_server *s = ss->s;
    job *j = ss->j;
    bool chat = j->req.kind == DF_SRV_CHAT;
    if (j->req.x.native) { /* llama.cpp's /completion stream */
        cJSON_Delete(delta);
        cJSON *o = df_srv_native_chunk(ss->choice, text, finish, j->n_prompt, j->n_gen, s->model_id);
        if (j->req.logprobs && rec_b > rec_a)
            cJSON_AddItemToObject(o, "completion_probabilities", df_srv_token_lps_json(s, j, recs, rec_a, rec_b, true));
        return o;
    }
    cJSON *o = response_head(s, j, chat ? "chat.completion.chunk" : "text_completion");
    cJSON *ch = cJSON_AddArrayToObject(o, "choices"), *c0 = cJSON_CreateObject();
    cJSON_AddItemToArray(ch, c0);
    cJSON_AddNumberToObject(c0, "index", ss->choice);
    if (chat) {
        cJSON *d = delta ? delta : cJSON_CreateObject();
        if (!delta && text) cJSON_AddStringToObject(d, "content", text);
        cJSON_AddItemToObject(c0, "delta", d);
    } else {
        cJSON_Delete(delta);
        cJSON_AddStringToObject(c0, "text", text ? text : "");
    }
    if (j->req.logprobs && rec_b > rec_a) cJSON_AddItemToObject(c0, "logprobs", logprobs_json(s, j, recs, rec_a, rec_b));
    else cJSON_AddNullToObject(c0, "logprobs");
    if (finish) cJSON_AddStringToObject(c0, "finish_reason", finish);
    else cJSON_AddNullToObject(c0, "finish_reason");
    return o;
}

/* under mu: what choice ss->choice has new in text[0..safe) (done: all of it is there) */
static void stream_choice(stream_st *ss, const char *text, size_t safe, const tokrec *recs, int n_rec, bool done,
                          const char *finish) {
    job *j = ss->j;
    bool chat = j->req.kind == DF_SRV_CHAT;
    if (chat && !ss->role_sent) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        out_event(ss, chunk_json(ss, d, NULL, NULL, 0, 0, NULL));
        ss->role_sent = true;
    }
    bool calls = false;
    if (chat && j->ag.parse) { /* the parsed output: content, reasoning and tool calls as deltas */
        if (safe > ss->sent || done) {
            cJSON *ds = df_srv_agent_deltas(&j->ag, text, safe, done, &ss->asent, &calls), *d;
            while (ds && (d = cJSON_DetachItemFromArray(ds, 0))) out_event(ss, chunk_json(ss, d, NULL, NULL, 0, 0, NULL));
            cJSON_Delete(ds);
            ss->sent = safe;
        }
        calls = ss->asent.calls > 0;
    } else if (safe > ss->sent || (j->req.logprobs && n_rec > ss->rec_sent && done)) {
        char *t = strndup(text + ss->sent, safe - ss->sent);
        out_event(ss, chunk_json(ss, NULL, t ? t : "", recs, ss->rec_sent, n_rec, NULL));
        free(t);
        ss->sent = safe;
        ss->rec_sent = n_rec;
    }
    if (done && finish && strcmp(finish, "cancelled"))
        out_event(ss, chunk_json(ss, NULL, chat ? NULL : "", NULL, 0, 0, calls && !strcmp(finish, "stop") ? "tool_calls" : finish));
}

/* under mu: turn new job output into SSE events; returns true if something was added */
static bool stream_build(stream_st *ss) {
    job *j = ss->j;
    bool chat = j->req.kind == DF_SRV_CHAT;
    size_t before = ss->out_len;
    while (j->outs && ss->choice < j->choice) { /* finished choices: the rest of each */
        const choice_out *o = &j->outs[ss->choice];
        stream_choice(ss, o->text ? o->text : "", o->len, o->recs, o->n_rec, true, o->finish);
        ss->choice++;
        ss->sent = 0;
        ss->rec_sent = 0;
        memset(&ss->asent, 0, sizeof ss->asent);
        ss->role_sent = false;
    }
    bool done = j->state == J_DONE;
    stream_choice(ss, j->text ? j->text : "", j->safe, j->recs, j->n_rec, done, j->err_status ? NULL : j->finish);
    if (done) {
        if (j->err_status) {
            df_srv_error e;
            df_srv_set_error(&e, j->err_status, "server_error", "generation_failed", "%s", j->err_msg);
            char *t = df_srv_error_json(&e);
            if (t) { out_add(ss, "data: ", 6); out_add(ss, t, strlen(t)); out_add(ss, "\n\n", 2); free(t); }
        } else if (j->finish && strcmp(j->finish, "cancelled") && j->req.include_usage) {
            cJSON *o = response_head(ss->s, j, chat ? "chat.completion.chunk" : "text_completion");
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage_json(j));
            out_event(ss, o);
        }
        if (!j->req.x.native) out_add(ss, "data: [DONE]\n\n", 14);
        ss->finished = true;
    }
    return ss->out_len > before;
}

static ssize_t stream_reader(void *cls, uint64_t pos, char *buf, size_t max) {
    stream_st *ss = cls;
    df_server *s = ss->s;
    for (;;) {
        if (ss->out_pos < ss->out_len) {
            size_t n = ss->out_len - ss->out_pos;
            if (n > max) n = max;
            memcpy(buf, ss->out + ss->out_pos, n);
            ss->out_pos += n;
            if (ss->out_pos == ss->out_len) ss->out_pos = ss->out_len = 0;
            return (ssize_t)n;
        }
        if (ss->finished) {
            df_srv_conn_timeout(s, ss->c, true); /* the connection may stay open for the next request */
            return MHD_CONTENT_READER_END_OF_STREAM;
        }
        pthread_mutex_lock(&s->mu);
        bool got = stream_build(ss);
        if (!got) {
            df_srv_timed_wait(&ss->j->cv, &s->mu, 100);
            if (ss->j->state != J_DONE && (df_srv_peer_closed(ss->fd) || atomic_load(&s->stopping) == 2)) {
                atomic_store(&ss->j->cancel, 1);
                pthread_mutex_unlock(&s->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        pthread_mutex_unlock(&s->mu);
    }
}

static void stream_free(void *cls) {
    stream_st *ss = cls;
    df_server *s = ss->s;
    pthread_mutex_lock(&s->mu);
    if (ss->j->state != J_DONE) {
        atomic_store(&ss->j->cancel, 1);
        if (ss->j->state == J_ACTIVE && ss->j->slot >= 0) deltafin_ctx_cancel(s->slots[ss->j->slot].ctx);
        pthread_cond_signal(&s->sched_cv);
    }
    df_srv_job_unref_locked(ss->j);
    pthread_mutex_unlock(&s->mu);
    free(ss->out);
    free(ss);
}

/* under s->mu (released here): answer job j on connection c as a server-sent event stream */
enum MHD_Result df_srv_stream_start(df_server *s, struct MHD_Connection *c, job *j, int fd) {
    stream_st *ss = calloc(1, sizeof *ss);
    if (!ss) { atomic_store(&j->cancel, 1); df_srv_job_unref_locked(j); pthread_mutex_unlock(&s->mu); return MHD_NO; }
    ss->s = s;
    ss->j = j;
    ss->c = c;
    ss->fd = fd;
    pthread_mutex_unlock(&s->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_reader, ss, stream_free);
    if (!r) { stream_free(ss); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ret;
}
