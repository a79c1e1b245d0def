/* info.c — `deltafin info MODEL`: metadata (architecture, hyperparameters, tokenizer),
 * a tensor summary (count and bytes per type and per role) and the memory plan (dense
 * bytes, routed expert bytes, KV bytes per token and at the default context, scratch).
 * The model is bound and shape-checked but no weights are read (DF_LOAD_META_ONLY). */
#include "app/cli/cli_args.h"
#include "deltafin.h"
#include "runtime/loader.h"
#include "forward/session.h"
#include "runtime/plan.h"
#include "model/model.h"
#include "kernels/quant.h"
#include "text/tokenizer.h"
#include "base/util.h"

#include <stdio.h>
#include <string.h>


static void usage(FILE *f) {
    fprintf(f,
        "usage: deltafin info [-m] MODEL [options]\n"
        "  -c, --ctx-size N      context for the KV line of the memory plan\n"
        "                        (default: min(training context, 4096))\n"
        "  -b, --batch-size N    batch for the scratch line (default 512)\n"
        "  --mem-limit SIZE      also show which dense layers would stream at this limit\n"
        "                        (as deltafin run --mem-limit SIZE plans them)\n"
        "  -h, --help            this help\n");
}

enum { R_EMBD, R_OUTPUT, R_ATTN, R_NORM, R_ROUTER, R_EXPERTS, R_SHARED, R_FFN, R_OTHER, R_N };
static const char *role_names[R_N] = {"token embedding", "output", "attention", "norms",
                                      "router", "routed experts", "shared experts", "dense ffn", "other"};

static int role_of(const df_model *m, const df_tensor *t) {
    const char *n = t->info->name;
    if (t == m->tok_embd) return R_EMBD;
    if (t == m->output || t == m->output_norm) return R_OUTPUT;
    for (int l = 0; l < m->hp.n_layer; l++)
        for (int p = 0; p < DF_EXPERT_NPARTS; p++)
            if (m->layers[l].exps[p] == t) return R_EXPERTS;
    if (strstr(n, "_norm")) return R_NORM;
    if (strstr(n, "ffn_gate_inp") && !strstr(n, "shexp")) return R_ROUTER;
    if (strstr(n, "exp_probs_b")) return R_ROUTER;
    if (strstr(n, "shexp")) return R_SHARED;
    if (strstr(n, ".attn_")) return R_ATTN;
    if (strstr(n, ".ffn_")) return R_FFN;
    return R_OTHER;
}

int cmd_info(int argc, char **argv) {
    const char *model = NULL;
    int n_ctx = 0, n_batch = 512;
    uint64_t mem_limit = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
        else if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && i + 1 < argc) model = argv[++i];
        else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx-size")) && i + 1 < argc) n_ctx = df_cli_int(argv, &i);
        else if ((!strcmp(a, "-b") || !strcmp(a, "--batch-size")) && i + 1 < argc) n_batch = df_cli_int(argv, &i);
        else if (!strcmp(a, "--mem-limit") && i + 1 < argc) {
            if (df_parse_size(argv[++i], &mem_limit) < 0 || !mem_limit) {
                fprintf(stderr, "info: --mem-limit '%s': expected a size like 20G\n", argv[i]);
                return 2;
            }
        }
        else if (a[0] != '-' && !model) model = a;
        else { fprintf(stderr, "info: unknown option '%s'\n", a); usage(stderr); return 2; }
    }
    if (!model) { usage(stderr); return 2; }
    df_model *m = NULL;
    deltafin_model_params lp = deltafin_model_default_params();
    lp.mem_limit = mem_limit; /* the plan run would make at this limit (0: available RAM) */
    if (df_model_load(model, &lp, DF_LOAD_META_ONLY, &m) < 0) {
        fprintf(stderr, "info: %s\n", deltafin_errmsg());
        return 1;
    }
    const df_hparams *hp = &m->hp;
    char b1[32], b2[32];
    const char *name = deltafin_model_meta_str(m, "general.name");
    printf("model:        %s\n", model);
    printf("name:         %s\n", name ? name : "(none)");
    printf("architecture: %s (GGUF v%d, %d tensors, %d KV pairs, %d file%s)\n", m->arch->name,
           m->gguf->version, m->gguf->n_tensors, m->gguf->n_kv, m->gguf->n_shards,
           m->gguf->n_shards > 1 ? "s" : "");
    printf("\nhyperparameters:\n");
    printf("  n_vocab %d, n_ctx_train %d, n_embd %d, n_layer %d\n", hp->n_vocab, hp->n_ctx_train,
           hp->n_embd, hp->n_layer);
    printf("  n_head %d, n_head_kv %d, head_dim k %d / v %d, n_rot %d, rope %s, freq_base %g, freq_scale %g%s\n",
           hp->n_head, hp->n_head_kv, hp->n_embd_head_k, hp->n_embd_head_v, hp->n_rot,
           hp->rope_mode == DF_ROPE_NEOX ? "neox" : "norm", hp->rope_freq_base, hp->rope_freq_scale,
           hp->yarn_ext_factor != 0 ? " (yarn)" : "");
    printf("  rms_eps %g, kq_scale %g, n_ff %d\n", hp->eps, hp->kq_scale, hp->n_ff);
    if (hp->n_expert)
        printf("  experts %d (used %d), n_ff_exp %d, shared width %d, norm_w %s, scale %g\n",
               hp->n_expert, hp->n_expert_used, hp->n_ff_exp, hp->n_ff_shexp,
               hp->expert_weights_norm ? "yes" : "no", hp->expert_weights_scale);
    printf("\ntokenizer:    ");
    if (m->tokenizer) {
        const int32_t *eog = NULL;
        int n_eog = df_tokenizer_eog_ids(m->tokenizer, &eog);
        printf("%s%s%s, bos %d, eos %d, %d end-of-generation id%s\n",
               df_tokenizer_type(m->tokenizer) == DF_TOK_SPM ? "SPM" : "BPE",
               *df_tokenizer_pre(m->tokenizer) ? ", pre " : "", df_tokenizer_pre(m->tokenizer),
               deltafin_token_bos(m),
               deltafin_token_eos(m), n_eog, n_eog == 1 ? "" : "s");
    } else {
        printf("(none)\n");
    }
    const char *tmpl = deltafin_model_meta_str(m, "tokenizer.chat_template");
    printf("chat template: %s\n", tmpl ? "present" : "(none)");

    /* tensors by type and role */
    uint64_t ty_n[DF_TYPE_COUNT] = {0}, ty_b[DF_TYPE_COUNT] = {0}, ro_n[R_N] = {0}, ro_b[R_N] = {0};
    for (int i = 0; i < m->n_bound; i++) {
        const df_tensor *t = &m->tensors[i];
        if (t->type >= 0 && t->type < DF_TYPE_COUNT) { ty_n[t->type]++; ty_b[t->type] += t->info->nbytes; }
        int r = role_of(m, t);
        ro_n[r]++;
        ro_b[r] += t->info->nbytes;
    }
    printf("\ntensors by type:\n");
    for (int t = 0; t < DF_TYPE_COUNT; t++)
        if (ty_n[t]) printf("  %-8s %6llu tensors %12s\n", df_type_info(t)->name, (unsigned long long)ty_n[t],
                            df_fmt_bytes(ty_b[t], b1, sizeof b1));
    printf("tensors by role:\n");
    for (int r = 0; r < R_N; r++)
        if (ro_n[r]) printf("  %-16s %6llu tensors %12s\n", role_names[r], (unsigned long long)ro_n[r],
                            df_fmt_bytes(ro_b[r], b1, sizeof b1));

    int ctx = n_ctx > 0 ? n_ctx : (hp->n_ctx_train < 4096 ? hp->n_ctx_train : 4096);
    if (n_batch <= 0) n_batch = 512;
    if (n_batch > ctx) n_batch = ctx;
    df_footprint plan;
    df_model_footprint(m, ctx, &plan);
    const uint64_t scratch = df_session_scratch_bytes(m, n_batch, 1);
    printf("\nmemory plan:\n");
    printf("  dense weights (resident)   %12s\n", df_fmt_bytes(plan.dense_bytes, b1, sizeof b1));
    printf("  routed experts             %12s", df_fmt_bytes(plan.expert_bytes, b1, sizeof b1));
    if (plan.expert_bytes_one) printf("  (largest expert %s)", df_fmt_bytes(plan.expert_bytes_one, b2, sizeof b2));
    printf("\n");
    printf("  KV cache per token (F16)   %12s\n", df_fmt_bytes(plan.kv_bytes_per_token, b1, sizeof b1));
    if (plan.state_bytes) /* kimi-k3 KDA layers: conv + delta-rule state, per sequence */
        printf("  recurrent state per seq    %12s\n", df_fmt_bytes(plan.state_bytes, b1, sizeof b1));
    printf("  KV cache at n_ctx %-7d  %12s%s\n", ctx, df_fmt_bytes(plan.kv_bytes, b1, sizeof b1),
           plan.state_bytes ? " (incl. recurrent state + prompt snapshot)" : "");
    printf("  scratch (n_batch %d)%*s%12s\n", n_batch, n_batch >= 1000 ? 4 : n_batch >= 100 ? 5 : 6, "",
           df_fmt_bytes(scratch, b1, sizeof b1));
    printf("  all resident               %12s\n",
           df_fmt_bytes(plan.dense_bytes + plan.expert_bytes + plan.kv_bytes + scratch, b1, sizeof b1));
    if (mem_limit) {
        /* the plan run makes (runtime/plan.c), computed by the same load */
        deltafin_plan rp;
        char b3[1024];
        int rc = deltafin_model_plan(m, &rp);
        printf("\nat --mem-limit %s (KV and scratch at the run's planned context):\n",
               df_fmt_bytes(mem_limit, b1, sizeof b1));
        if (rc < 0) {
            printf("  refused: %s\n", deltafin_errmsg());
        } else {
            printf("  routed experts             %s\n", !hp->n_expert ? "(none)" : rp.experts_stream ? "streamed (expert cache)" : "resident");
            printf("  %s\n", deltafin_plan_dense_str(&rp, b3, sizeof b3));
            if (rp.dense_layers_streamed)
                printf("  dense resident + buffers   %12s\n", df_fmt_bytes(rp.dense_bytes, b1, sizeof b1));
            if (rp.experts_stream)
                printf("  expert cache               %12s  (%d slots of %s, %.2f%% of the %d experts)\n",
                       df_fmt_bytes(rp.cache_bytes, b1, sizeof b1), rp.n_slots,
                       df_fmt_bytes(rp.slot_bytes, b2, sizeof b2),
                       rp.n_experts_total ? 100.0 * rp.n_slots / rp.n_experts_total : 100.0, rp.n_experts_total);
        }
    }
    deltafin_model_free(m);
    return 0;
}
