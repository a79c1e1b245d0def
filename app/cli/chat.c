/* chat.c — `deltafin chat`: interactive multi-turn chat in the terminal. Each turn renders
 * the whole conversation with the model's chat template, keeps the KV cache of the longest
 * common token prefix with what is already cached (deltafin_ctx_truncate) and decodes only
 * the rest, then streams the answer. Input comes through lineedit.h (libedit on a terminal:
 * history kept in a file, Up/Down, multi-line messages with a trailing backslash or a """
 * block). A line that starts with / is a command (/help /reset /save /load /exit), never
 * sent to the model. Ctrl-C stops the current answer (the program goes on); at the prompt it
 * asks for a second Ctrl-C, which quits. When the context is full the answer stops with a
 * notice; --context-shift drops the oldest turns so the next message fits. gpt-oss (Harmony:
 * the prompt ends with "<|start|>assistant"): only the final / commentary text is shown and
 * kept as the answer; the analysis channel (reasoning) goes to stderr with -v, as
 * llama-server's reasoning format separates it. */
#include "app/cli/flags.h"
#include "app/cli/lineedit.h"
#include "app/cli/load_progress.h"
#include "app/cli/textbuf.h"
#include "deltafin.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const df_cmd k_chat = {
    DF_CMD_CHAT, "chat", "usage: deltafin chat -m MODEL [options]   (then type messages; /help lists the commands)",
    "Interactive multi-turn chat in the terminal, with the model's chat template. On a terminal the\n"
    "input line is editable (emacs keys, Up/Down through the history, kept in --history). A message\n"
    "spans lines with a trailing \\ or between two lines of \"\"\". Ctrl-C stops the current answer;\n"
    "at the prompt, Ctrl-C twice (or Ctrl-D, or /exit) quits.",
    "Commands: /help, /reset, /save FILE, /load FILE, /exit (// sends a line that starts with /).", 0};

static const char k_commands[] =
    "commands (a line that starts with / is never sent to the model; // sends one that does):\n"
    "  /help, /?          this list\n"
    "  /reset, /clear     forget the conversation (the system prompt stays)\n"
    "  /save FILE         write the conversation to FILE as JSON (OpenAI messages)\n"
    "  /load FILE         continue a conversation written by /save\n"
    "  /exit, /quit, /bye leave (also Ctrl-D, or Ctrl-C twice at the prompt)\n"
    "a message spans lines with a trailing \\, or between two lines of \"\"\"; Ctrl-C stops an answer\n";

/* the Harmony splitter's sink: content is the answer, reasoning only with -v (stderr) */
typedef struct {
    df_textbuf *answer;
    bool show_reasoning, in_reasoning;
    int err;
} hm_out;

static void hm_sink(void *ud, int channel, const char *text, size_t n) {
    hm_out *o = ud;
    if (channel == DELTAFIN_CH_REASONING) {
        if (!o->show_reasoning) return;
        if (!o->in_reasoning) fputs("[reasoning] ", stderr);
        o->in_reasoning = true;
        fwrite(text, 1, n, stderr);
        return;
    }
    if (o->in_reasoning) { fputc('\n', stderr); o->in_reasoning = false; }
    if (df_textbuf_put(o->answer, text, n) < 0) { o->err = 1; return; }
    fwrite(text, 1, n, stdout);
    fflush(stdout);
}

static bool ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
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

/* drop messages [i, i+k) keeping the order of the rest */
static void msgs_drop(msgs_t *m, int i, int k) {
    for (int j = i; j < i + k; j++) free((char *)m->v[j].content);
    memmove(m->v + i, m->v + i + k, sizeof m->v[0] * (size_t)(m->n - i - k));
    m->n -= k;
}

static const char *role_name(const char *r) { /* the static spelling, or NULL for an unknown role */
    static const char *const k[] = {"system", "user", "assistant"};
    for (int i = 0; i < 3; i++)
        if (r && !strcmp(r, k[i])) return k[i];
    return NULL;
}

/* /save FILE: the conversation as an OpenAI messages array */
static int msgs_save(const msgs_t *m, const char *path) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; a && i < m->n; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o || !cJSON_AddStringToObject(o, "role", m->v[i].role) ||
            !cJSON_AddStringToObject(o, "content", m->v[i].content)) {
            cJSON_Delete(o);
            cJSON_Delete(a);
            a = NULL;
            break;
        }
        cJSON_AddItemToArray(a, o);
    }
    char *text = a ? cJSON_Print(a) : NULL;
    cJSON_Delete(a);
    if (!text) { fprintf(stderr, "/save: out of memory\n"); return -1; }
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f && fclose(f) != 0) ok = 0;
    free(text);
    if (!ok) { fprintf(stderr, "/save: %s: %s\n", path, strerror(errno)); return -1; }
    return 0;
}

/* /load FILE: replaces the conversation when the whole file is valid; names the problem else */
static int msgs_load(msgs_t *m, const char *path) {
    char *data = NULL;
    size_t len = 0;
    if (deltafin_read_file(path, &data, &len) < 0) { fprintf(stderr, "/load: %s\n", deltafin_errmsg()); return -1; }
    cJSON *a = cJSON_ParseWithLength(data, len);
    free(data);
    if (!cJSON_IsArray(a)) {
        fprintf(stderr, "/load: %s: not a JSON array of messages (as /save writes)\n", path);
        cJSON_Delete(a);
        return -1;
    }
    msgs_t n = {0};
    int i = 0, rc = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, a) {
        const char *role = role_name(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "role")));
        const char *content = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "content"));
        if (!role || !content) {
            fprintf(stderr, "/load: %s: message %d needs a role (system, user, assistant) and a string content\n", path, i);
            rc = -1;
            break;
        }
        if (msgs_push(&n, role, content) < 0) { fprintf(stderr, "/load: out of memory\n"); rc = -1; break; }
        i++;
    }
    cJSON_Delete(a);
    if (rc < 0) { msgs_clear(&n, 0); free(n.v); return -1; }
    msgs_clear(m, 0);
    free(m->v);
    *m = n;
    return 0;
}

/* SIGINT: without SA_RESTART while the prompt waits, so the read ends at once */
static void set_sigint(bool restart) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = restart ? SA_RESTART : 0;
    sigaction(SIGINT, &sa, NULL);
}

/* the first word of a command line ("/save" of "/save a.json") and its argument */
static bool is_cmd(const char *text, const char *name, const char **arg) {
    size_t n = strlen(name);
    if (strncmp(text, name, n) || (text[n] && text[n] != ' ' && text[n] != '\t')) return false;
    const char *a = text + n;
    while (*a == ' ' || *a == '\t') a++;
    if (arg) *arg = a;
    return true;
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

/* what one chat session holds across turns */
typedef struct {
    const df_settings *S;
    deltafin_model *m;
    deltafin_ctx *c;
    deltafin_sampler *smp;
    deltafin_detok *dt, *dts;   /* dts: special tokens rendered (Harmony) */
    deltafin_harmony *hm;
    int32_t *cache;             /* the tokens in the KV cache */
    int n_cache, nctx;
    int32_t *ids;               /* the rendered conversation's tokens */
    msgs_t msgs;
    int n_keep_msgs;            /* the leading system messages: /reset and the context shift keep them */
    df_textbuf answer;
    FILE *note;                 /* notices for the person at the prompt */
} chat_s;

enum { CMD_DONE, CMD_RESET, CMD_EXIT };

/* a line that starts with / (not //): a command, never sent to the model */
static int chat_command(chat_s *cs, const char *text) {
    const char *arg = NULL;
    FILE *note = cs->note;
    if (is_cmd(text, "/exit", NULL) || is_cmd(text, "/quit", NULL) || is_cmd(text, "/bye", NULL)) return CMD_EXIT;
    if (is_cmd(text, "/help", NULL) || is_cmd(text, "/?", NULL)) {
        fputs(k_commands, note);
    } else if (is_cmd(text, "/reset", NULL) || is_cmd(text, "/clear", NULL)) {
        msgs_clear(&cs->msgs, cs->n_keep_msgs);
        deltafin_ctx_truncate(cs->c, 0);
        cs->n_cache = 0;
        fprintf(note, "(conversation cleared)\n");
        return CMD_RESET;
    } else if (is_cmd(text, "/save", &arg)) {
        if (!*arg) fprintf(stderr, "/save needs a file name\n");
        else if (msgs_save(&cs->msgs, arg) == 0) fprintf(note, "(saved %d messages to %s)\n", cs->msgs.n, arg);
    } else if (is_cmd(text, "/load", &arg)) {
        if (!*arg) {
            fprintf(stderr, "/load needs a file name\n");
        } else if (msgs_load(&cs->msgs, arg) == 0) {
            cs->n_keep_msgs = 0;
            while (cs->n_keep_msgs < cs->msgs.n && !strcmp(cs->msgs.v[cs->n_keep_msgs].role, "system")) cs->n_keep_msgs++;
            fprintf(note, "(loaded %d messages from %s)\n", cs->msgs.n, arg);
        }
    } else {
        size_t w = strcspn(text, " \t");
        fprintf(stderr, "unknown command '%.*s' (/help lists the commands; // sends a line that starts with /)\n", (int)w,
                text);
    }
    return CMD_DONE;
}

/* Render the conversation and tokenize it into cs->ids; with --context-shift drop the oldest
 * turns until the answer has room. Returns the token count (< 0: failed, named) and whether
 * the prompt opens a Harmony message. */
static int render_fit(chat_s *cs, bool *harmony) {
    const int nctx = cs->nctx, n_predict = cs->S->n_predict;
    /* with --context-shift the prompt leaves this much room for the answer */
    const int answer_room = n_predict > 0 && n_predict < nctx / 2 ? n_predict : nctx / 4;
    int n = 0, dropped = 0;
    msgs_t *ms = &cs->msgs;
    for (;;) {
        char *rendered = NULL;
        if (deltafin_chat_render(cs->m, cs->S->chat_template, ms->v, ms->n, NULL, true, &rendered) < 0) {
            fprintf(stderr, "chat: %s\n", deltafin_errmsg());
            return -1;
        }
        free(cs->ids);
        cs->ids = NULL;
        *harmony = ends_with(rendered, "<|start|>assistant");
        n = tokenize_all(cs->m, rendered, &cs->ids);
        free(rendered);
        if (n < 0) { fprintf(stderr, "chat: tokenize: %s\n", deltafin_errmsg()); return -1; }
        if (!cs->S->context_shift || n <= nctx - answer_room || ms->n - 1 <= cs->n_keep_msgs) break;
        /* the oldest turn: a message and, when it is the user's, the answer after it */
        const int k0 = cs->n_keep_msgs;
        int k = ms->n - 1 - k0 >= 2 && !strcmp(ms->v[k0].role, "user") && !strcmp(ms->v[k0 + 1].role, "assistant") ? 2 : 1;
        msgs_drop(ms, k0, k);
        dropped += k;
    }
    if (dropped)
        fprintf(cs->note, "(context shift: dropped the %d oldest message%s so the conversation fits in %d tokens)\n",
                dropped, dropped > 1 ? "s" : "", nctx);
    return n;
}

enum { ANS_OK, ANS_STOPPED, ANS_FULL, ANS_FATAL };

/* Sample, show and decode the answer into cs->answer (Harmony: only the final / commentary
 * text; the reasoning on stderr with -v). Returns ANS_*; *n_gen the tokens sampled. */
static int answer_turn(chat_s *cs, bool harmony, int *n_gen) {
    const int n_predict = cs->S->n_predict, n_vocab = deltafin_model_n_vocab(cs->m);
    cs->answer.len = 0;
    if (df_textbuf_put(&cs->answer, "", 0) < 0) return ANS_FATAL;
    deltafin_detok *td = harmony ? cs->dts : cs->dt;
    deltafin_detok_reset(td);
    deltafin_harmony_reset(cs->hm);
    hm_out ho = {.answer = &cs->answer, .show_reasoning = cs->S->verbose};
    int st = ANS_OK;
    *n_gen = 0;
    while (n_predict < 0 || *n_gen < n_predict) {
        if (g_interrupt) { st = ANS_STOPPED; break; }
        const float *lg = deltafin_logits(cs->c, -1);
        int32_t id = deltafin_sampler_sample(cs->smp, lg, n_vocab);
        if (id < 0) { fprintf(stderr, "\nchat: sampling: %s\n", deltafin_errmsg()); break; }
        deltafin_sampler_accept(cs->smp, id);
        if (deltafin_token_is_eog(cs->m, id)) break;
        (*n_gen)++;
        const char *piece;
        int pn = deltafin_detok_push(td, id, &piece); /* whole characters only */
        if (pn > 0 && harmony) {
            deltafin_harmony_push(cs->hm, piece, (size_t)pn, hm_sink, &ho);
            if (ho.err) return ANS_FATAL;
        } else if (pn > 0) {
            if (df_textbuf_put(&cs->answer, piece, (size_t)pn) < 0) return ANS_FATAL;
            fwrite(piece, 1, (size_t)pn, stdout);
            fflush(stdout);
        }
        if (cs->n_cache >= cs->nctx) { st = ANS_FULL; break; }
        int rc = deltafin_decode(cs->c, &id, 1, false);
        if (rc < 0) {
            cs->n_cache = deltafin_ctx_pos(cs->c);
            if (rc == DELTAFIN_ERR_CANCELLED) { st = ANS_STOPPED; break; }
            fprintf(stderr, "\nchat: decode: %s\n", deltafin_errmsg());
            return ANS_FATAL;
        }
        cs->cache[cs->n_cache++] = id;
    }
    const char *rest;
    int rn = deltafin_detok_flush(td, &rest);
    if (harmony) {
        if (rn > 0) deltafin_harmony_push(cs->hm, rest, (size_t)rn, hm_sink, &ho);
        deltafin_harmony_flush(cs->hm, hm_sink, &ho);
        if (ho.in_reasoning) fputc('\n', stderr);
        if (ho.err) return ANS_FATAL;
    } else if (rn > 0) {
        if (df_textbuf_put(&cs->answer, rest, (size_t)rn) < 0) return ANS_FATAL;
        fwrite(rest, 1, (size_t)rn, stdout);
    }
    fputc('\n', stdout);
    fflush(stdout);
    return st;
}

/* One user message: fit and decode the conversation (reusing the cached prefix), answer it.
 * Returns 0; 1 when the conversation does not fit (the turn does not count), 2 when Ctrl-C
 * stopped its prompt (the message is dropped again in both cases); < 0 on a fatal error. */
static int chat_turn(chat_s *cs, const char *text, const char *gbnf, int turn, int stats) {
    if (msgs_push(&cs->msgs, "user", text) < 0) return -1;
    bool harmony = false;
    const int nctx = cs->nctx;
    int n = render_fit(cs, &harmony);
    if (n < 0) return -1;
    if (n >= nctx) {
        fprintf(stderr, "chat: the conversation has %d tokens, the context holds %d: /reset, use a larger -c%s\n", n,
                nctx, cs->S->context_shift ? "" : " or --context-shift");
        msgs_clear(&cs->msgs, cs->msgs.n - 1);
        return 1;
    }
    int keep = 0;
    while (keep < cs->n_cache && keep < n && cs->cache[keep] == cs->ids[keep]) keep++;
    if (keep >= n) keep = n - 1; /* the last prompt token is decoded again for its logits */
    deltafin_ctx_truncate(cs->c, keep);
    cs->n_cache = keep;
    uint64_t t0 = deltafin_time_ns();
    int rc = deltafin_decode(cs->c, cs->ids + keep, n - keep, false);
    uint64_t t_prompt = deltafin_time_ns() - t0;
    if (rc < 0) {
        cs->n_cache = deltafin_ctx_pos(cs->c);
        if (rc == DELTAFIN_ERR_CANCELLED) { fprintf(stderr, "\n(stopped)\n"); msgs_clear(&cs->msgs, cs->msgs.n - 1); return 2; }
        fprintf(stderr, "chat: decode: %s\n", deltafin_errmsg());
        return -1;
    }
    memcpy(cs->cache + keep, cs->ids + keep, sizeof(int32_t) * (size_t)(n - keep));
    cs->n_cache = n;
    for (int i = 0; i < n; i++) deltafin_sampler_accept(cs->smp, cs->ids[i]);
    if (gbnf) { /* each answer is one generation of the grammar, attached after the prompt */
        deltafin_grammar *g = NULL;
        if (deltafin_grammar_create(deltafin_model_vocab(cs->m), gbnf, NULL, &g) < 0 ||
            deltafin_sampler_set_grammar(cs->smp, g) < 0) {
            fprintf(stderr, "chat: grammar: %s\n", deltafin_errmsg());
            return -1;
        }
    }
    int n_gen = 0;
    uint64_t t1 = deltafin_time_ns();
    int st = answer_turn(cs, harmony, &n_gen);
    if (st == ANS_FATAL) return -1;
    if (gbnf) deltafin_sampler_set_grammar(cs->smp, NULL); /* the next prompt must not advance it */
    if (st == ANS_STOPPED) fprintf(stderr, "(stopped)\n");
    if (st == ANS_FULL)
        fprintf(cs->note, "(context full: the conversation fills all %d tokens of the context; %s)\n", nctx,
                cs->S->context_shift ? "the next message drops the oldest turns"
                                     : "/reset to start over, or chat with --context-shift or a larger -c");
    uint64_t t_gen = deltafin_time_ns() - t1;
    if (msgs_push(&cs->msgs, "assistant", cs->answer.p) < 0) return -1;
    if (stats)
        fprintf(stderr, "[turn %d] prompt %d tokens: reused %d, decoded %d (%.1f tok/s) | generated %d (%.1f tok/s)\n",
                turn, n, keep, n - keep, t_prompt ? (n - keep) / (t_prompt / 1e9) : 0.0, n_gen,
                t_gen && n_gen ? n_gen / (t_gen / 1e9) : 0.0);
    return 0;
}

/* the model, context, sampler and detokenizers of a session; < 0 (named) on failure, -2 when
 * a sampling flag does not fit the model (a usage error) */
static int chat_open(chat_s *cs, df_settings *S) {
    memset(cs, 0, sizeof *cs);
    cs->S = S;
    deltafin_model_params mp = df_cli_model_params(S);
    df_load_progress load_progress = {0};
    mp.progress_cb = df_load_progress_cb;
    mp.progress_ud = &load_progress;
    if (deltafin_model_load(S->model, &mp, &cs->m) < 0) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); return -1; }
    deltafin_ctx_params cp = df_cli_ctx_params(S);
    if (deltafin_ctx_create(cs->m, &cp, &cs->c) < 0) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); return -1; }
    if (df_cli_apply_routing(&k_chat, S, cs->c)) return -1;
    cs->nctx = deltafin_ctx_n_ctx(cs->c);
    cs->cache = malloc(sizeof(int32_t) * (size_t)cs->nctx);
    if (!cs->cache) return -1;
    deltafin_sampler_params sp;
    if (df_cli_sampler(&k_chat, S, cs->m, &sp)) return -2;
    cs->smp = deltafin_sampler_create(&sp);
    if (!cs->smp) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); return -1; }
    cs->dt = deltafin_detok_create(cs->m, false);
    cs->dts = deltafin_detok_create(cs->m, true);
    cs->hm = deltafin_harmony_create();
    if (!cs->dt || !cs->dts || !cs->hm) { fprintf(stderr, "chat: %s\n", deltafin_errmsg()); return -1; }
    if (S->system && msgs_push(&cs->msgs, "system", S->system) < 0) return -1;
    cs->n_keep_msgs = cs->msgs.n;
    return 0;
}

static void chat_close(chat_s *cs) {
    msgs_clear(&cs->msgs, 0);
    free(cs->msgs.v);
    free(cs->answer.p);
    free(cs->ids);
    free(cs->cache);
    deltafin_sampler_free(cs->smp);
    deltafin_detok_free(cs->dt);
    deltafin_detok_free(cs->dts);
    deltafin_harmony_free(cs->hm);
    deltafin_ctx_free(cs->c);
    deltafin_model_free(cs->m);
}

int cmd_chat(int argc, char **argv) {
    df_settings S;
    int prc = df_cli_parse(&k_chat, argc, argv, &S);
    if (prc != DF_CLI_GO) return prc;
    const int stats = S.verbose ? 2 : S.stats ? 1 : 0;
    if (!S.model) {
        fprintf(stderr, "chat: -m MODEL is required\n\n");
        df_cli_help(&k_chat, stderr);
        return 2;
    }
    /* an unknown template is refused before the model loads (as serve does) */
    if (S.chat_template && S.chat_template[0] && deltafin_chat_template_check(S.chat_template) < 0)
        return df_cli_usage_error(&k_chat, "--chat-template: %s", deltafin_errmsg());
    char *gbnf = NULL;
    if (df_cli_grammar(&k_chat, &S, &gbnf)) return 1;
    if (df_cli_log_begin(&k_chat, &S) != DF_CLI_GO) { free(gbnf); return 1; }

    int ret = 1;
    chat_s cs;
    df_lineedit *le = NULL;
    char *hist_path = NULL, *first = NULL;
    int orc = chat_open(&cs, &S);
    if (orc < 0) {
        if (orc == -2) ret = 2;
        goto done;
    }
    if (!S.history_file) {
        const char *home = getenv("HOME");
        if (home && *home && asprintf(&hist_path, "%s/.deltafin_history", home) < 0) hist_path = NULL;
    } else if (*S.history_file) {
        hist_path = strdup(S.history_file);
    }
    le = df_le_open(hist_path, &g_interrupt);
    if (!le) { fprintf(stderr, "chat: cannot start the line editor\n"); goto done; }

    g_ctx = cs.c;
    const bool tty = isatty(0);
    if (tty) fprintf(stderr, "deltafin chat — type a message; /help lists the commands, Ctrl-C stops an answer\n");
    cs.note = tty ? stdout : stderr;

    int n_intr = 0; /* Ctrl-C at the prompt in a row */
    for (int turn = 1;; turn++) {
        g_interrupt = 0;
        set_sigint(false);
        char *text = NULL;
        int lr;
        if (turn == 1 && S.prompt) { /* -p: the first message (llama.cpp's escapes unless --no-escape) */
            if (!(first = strdup(S.prompt))) goto done;
            if (S.escape || !S.no_escape) df_cli_unescape(first);
            text = first;
            lr = DF_LE_LINE;
            S.prompt = NULL;
        } else {
            lr = df_le_message(le, "> ", "... ", &text);
        }
        set_sigint(true);
        if (lr == DF_LE_INTR) {
            turn--;
            if (++n_intr >= 2) { fputc('\n', cs.note); break; }
            fprintf(cs.note, "\n(Ctrl-C again to exit, or /exit)\n");
            continue;
        }
        if (lr == DF_LE_EOF) break;
        if (lr < 0) { fprintf(stderr, "chat: reading the input: %s\n", strerror(errno)); goto done; }
        n_intr = 0;
        if (!*text) { turn--; continue; }
        df_le_history_add(le, text);
        if (text[0] == '/' && text[1] == '/') {
            text++; /* "//..." sends "/..." */
        } else if (text[0] == '/') {
            int cr = chat_command(&cs, text);
            if (cr == CMD_EXIT) break;
            turn = cr == CMD_RESET ? 0 : turn - 1;
            continue;
        }
        int tr = chat_turn(&cs, text, gbnf, turn, stats);
        if (tr < 0) goto done;
        if (tr == 1) turn--;
        if (S.single_turn && tr == 0) break;
    }
    ret = 0;
done:
    g_ctx = NULL;
    signal(SIGINT, SIG_DFL);
    df_le_close(le);
    chat_close(&cs);
    free(first);
    free(gbnf);
    free(hist_path);
    df_cli_log_end(&S);
    return ret;
}
