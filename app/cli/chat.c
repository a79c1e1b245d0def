/* chat.c — `deltafin chat`: interactive multi-turn chat in the terminal. Each turn renders
 * the whole conversation with the model's chat template, keeps the KV cache of the longest
 * common token prefix with what is already cached (deltafin_ctx_truncate) and decodes only
 * the rest, then streams the answer. Ctrl-C stops the current answer (the program goes on);
 * /reset clears the conversation, /exit (or end of input) quits. */
#include "app/cli/flags.h"
#include "app/cli/load_progress.h"
#include "deltafin.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const df_cmd k_chat = {
    DF_CMD_CHAT, "chat", "usage: deltafin chat -m MODEL [options]   (then type messages; /reset, /exit)",
    "Interactive multi-turn chat in the terminal, with the model's chat template. Ctrl-C stops the\n"
    "current answer; /reset clears the conversation; /exit (or end of input) quits.", NULL, 0};

/* append n bytes to the answer (NUL-terminated); < 0 when out of memory */
static int answer_put(char **answer, size_t *alen, size_t *acap, const char *p, size_t n) {
    if (*alen + n + 1 > *acap) {
        size_t nc = (*alen + n + 1) * 2;
        char *na = realloc(*answer, nc);
        if (!na) return -1;
        *answer = na;
        *acap = nc;
    }
    memcpy(*answer + *alen, p, n);
    *alen += n;
    (*answer)[*alen] = 0;
    return 0;
}

static volatile sig_atomic_t g_interrupt;
static deltafin_ctx *volatile g_ctx;
static void on_sigint(int sig) {
    (void)sig;
    g_interrupt = 1;
    if (g_ctx) deltafin_ctx_cancel(g_ctx);
}

typedef struct {
    deltafin_chat_msg *v;
    int n, cap;
} msgs_t;

static int msgs_push(msgs_t *m, const char *role, const char *content) {
    if (m->n == m->cap) {
        int nc = m->cap ? m->cap * 2 : 8;
        deltafin_chat_msg *nv = realloc(m->v, sizeof *nv * (size_t)nc);
        if (!nv) return -1;
        m->v = nv;
        m->cap = nc;
    }
    memset(&m->v[m->n], 0, sizeof m->v[0]);
    m->v[m->n].role = role;
    m->v[m->n].content = strdup(content);
    if (!m->v[m->n].content) return -1;
    m->n++;
    return 0;
}

static void msgs_clear(msgs_t *m, int keep) {
    for (int i = keep; i < m->n; i++) free((char *)m->v[i].content);
    m->n = keep;
}

/* tokens of text (rendered conversation): BOS per the vocab, special tokens parsed, one BOS
 * kept when the template already wrote it */
static int tokenize_all(deltafin_model *m, const char *text, int32_t **ids) {
    size_t len = strlen(text);
    int n = deltafin_tokenize(m, text, len, true, true, NULL, 0);
    if (n < 0) return n;
    int32_t *v = malloc(sizeof(int32_t) * (size_t)(n > 0 ? n : 1));
    if (!v) return DELTAFIN_ERR_NOMEM;
    n = deltafin_tokenize(m, text, len, true, true, v, n);
    int32_t bos = deltafin_token_bos(m);
    if (n >= 2 && bos >= 0 && v[0] == bos && v[1] == bos) {
        memmove(v, v + 1, sizeof(int32_t) * (size_t)(n - 1));
        n--;
    }
    *ids = v;
    return n;
}

int cmd_chat(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_chat, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const char *model = S.model, *system = S.system, *tmpl = S.chat_template;
    const int n_predict = S.n_predict, stats = S.verbose ? 2 : S.stats ? 1 : 0;
    if (!model) {
        fprintf(stderr, "chat: -m MODEL is required\n\n");
        df_cli_help(&k_chat, stderr);
        return 2;
    }
    if (df_cli_log_begin(&k_chat, &S) != DF_CLI_GO) return 1;

    int ret = 1;
    deltafin_model *m = NULL;
    deltafin_ctx *c = NULL;
    deltafin_sampler *smp = NULL;
    deltafin_detok *dt = NULL;
    int32_t *cache = NULL, *ids = NULL;
    int n_cache = 0;
    msgs_t msgs = {0};
    char *line = NULL, *answer = NULL;
    size_t line_cap = 0;

    deltafin_model_params mp = df_cli_model_params(&S);
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    int rc = deltafin_model_load(model, &mp, &m);
    if (rc < 0) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); goto done; }
    deltafin_ctx_params cp = df_cli_ctx_params(&S);
    rc = deltafin_ctx_create(m, &cp, &c);
    if (rc < 0) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); goto done; }
    if (df_cli_apply_routing(&k_chat, &S, c)) goto done;
    const int nctx = deltafin_ctx_n_ctx(c);
    const int n_vocab = deltafin_model_n_vocab(m);
    cache = malloc(sizeof(int32_t) * (size_t)nctx);
    if (!cache) goto done;
    smp = deltafin_sampler_create(&S.sp);
    if (!smp) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); goto done; }
    dt = deltafin_detok_create(m, false);
    if (!dt) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); goto done; }
    if (system && msgs_push(&msgs, "system", system) < 0) goto done;
    const int n_keep_msgs = msgs.n;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART; /* Ctrl-C at the prompt does not end the program */
    sigaction(SIGINT, &sa, NULL);
    g_ctx = c;
    const bool tty = isatty(0);
    if (tty) fprintf(stderr, "deltafin chat — type a message; /reset clears, /exit quits, Ctrl-C stops an answer\n");

    for (int turn = 1;; turn++) {
        if (tty) { fputs("> ", stdout); fflush(stdout); }
        g_interrupt = 0;
        ssize_t ln = getline(&line, &line_cap, stdin);
        if (ln < 0) break;
        while (ln > 0 && (line[ln - 1] == '\n' || line[ln - 1] == '\r')) line[--ln] = 0;
        if (ln == 0) { turn--; continue; }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            msgs_clear(&msgs, n_keep_msgs);
            deltafin_ctx_truncate(c, 0);
            n_cache = 0;
            fprintf(tty ? stdout : stderr, "(conversation cleared)\n");
            turn = 0;
            continue;
        }
        if (msgs_push(&msgs, "user", line) < 0) goto done;
        char *rendered = NULL;
        rc = deltafin_chat_render(m, tmpl, msgs.v, msgs.n, NULL, true, &rendered);
        if (rc < 0) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); goto done; }
        free(ids);
        ids = NULL;
        int n = tokenize_all(m, rendered, &ids);
        free(rendered);
        if (n < 0) { fprintf(stderr, "chat: tokenize: %s\n", deltafin_errmsg()); goto done; }
        if (n >= nctx) {
            fprintf(stderr, "chat: the conversation has %d tokens, the context holds %d: /reset or use a larger -c\n", n, nctx);
            msgs_clear(&msgs, msgs.n - 1);
            turn--;
            continue;
        }
        int keep = 0;
        while (keep < n_cache && keep < n && cache[keep] == ids[keep]) keep++;
        if (keep >= n) keep = n - 1; /* the last prompt token is decoded again for its logits */
        deltafin_ctx_truncate(c, keep);
        n_cache = keep;
        uint64_t t0 = deltafin_time_ns();
        rc = deltafin_decode(c, ids + keep, n - keep, false);
        uint64_t t_prompt = deltafin_time_ns() - t0;
        if (rc < 0) {
            n_cache = deltafin_ctx_pos(c);
            if (rc == DELTAFIN_ERR_CANCELLED) { fprintf(stderr, "\n(stopped)\n"); msgs_clear(&msgs, msgs.n - 1); continue; }
            fprintf(stderr, "chat: decode: %s\n", deltafin_errmsg());
            goto done;
        }
        memcpy(cache + keep, ids + keep, sizeof(int32_t) * (size_t)(n - keep));
        n_cache = n;
        for (int i = 0; i < n; i++) deltafin_sampler_accept(smp, ids[i]);

        size_t alen = 0, acap = 256;
        free(answer);
        answer = malloc(acap);
        if (!answer) goto done;
        answer[0] = 0;
        deltafin_detok_reset(dt);
        int n_gen = 0;
        uint64_t t1 = deltafin_time_ns();
        bool stopped = false;
        while (n_predict < 0 || n_gen < n_predict) {
            if (g_interrupt) { stopped = true; break; }
            const float *lg = deltafin_logits(c, -1);
            int32_t id = deltafin_sampler_sample(smp, lg, n_vocab);
            deltafin_sampler_accept(smp, id);
            if (deltafin_token_is_eog(m, id)) break;
            n_gen++;
            const char *piece;
            int pn = deltafin_detok_push(dt, id, &piece); /* whole characters only */
            if (pn > 0) {
                if (answer_put(&answer, &alen, &acap, piece, (size_t)pn) < 0) goto done;
                fwrite(piece, 1, (size_t)pn, stdout);
                fflush(stdout);
            }
            if (n_cache >= nctx) break;
            rc = deltafin_decode(c, &id, 1, false);
            if (rc < 0) {
                n_cache = deltafin_ctx_pos(c);
                if (rc == DELTAFIN_ERR_CANCELLED) { stopped = true; break; }
                fprintf(stderr, "\nchat: decode: %s\n", deltafin_errmsg());
                goto done;
            }
            cache[n_cache++] = id;
        }
        const char *rest;
        int rn = deltafin_detok_flush(dt, &rest);
        if (rn > 0) {
            if (answer_put(&answer, &alen, &acap, rest, (size_t)rn) < 0) goto done;
            fwrite(rest, 1, (size_t)rn, stdout);
        }
        fputc('\n', stdout);
        fflush(stdout);
        if (stopped) fprintf(stderr, "(stopped)\n");
        uint64_t t_gen = deltafin_time_ns() - t1;
        if (msgs_push(&msgs, "assistant", answer) < 0) goto done;
        if (stats)
            fprintf(stderr, "[turn %d] prompt %d tokens: reused %d, decoded %d (%.1f tok/s) | generated %d (%.1f tok/s)\n",
                    turn, n, keep, n - keep, t_prompt ? (n - keep) / (t_prompt / 1e9) : 0.0, n_gen,
                    t_gen && n_gen ? n_gen / (t_gen / 1e9) : 0.0);
    }
    ret = 0;
done:
    g_ctx = NULL;
    signal(SIGINT, SIG_DFL);
    msgs_clear(&msgs, 0);
    free(msgs.v);
    free(line);
    free(answer);
    free(ids);
    free(cache);
    deltafin_sampler_free(smp);
    deltafin_detok_free(dt);
    deltafin_ctx_free(c);
    deltafin_model_free(m);
    df_cli_log_end(&S);
    return ret;
}
