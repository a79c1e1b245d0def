/* info.c — `deltafin info MODEL`: metadata (architecture, hyperparameters, tokenizer),
 * a tensor summary (count and bytes per type and per role) and the memory plan (dense
 * bytes, routed expert bytes, KV bytes per token and at the default context, scratch).
 * The model is bound and shape-checked but no weights are read (deltafin_model_load_meta). */
#include "app/cli/flags.h"
#include "deltafin_debug.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


static const df_cmd k_info = {
    DF_CMD_INFO, "info", "usage: deltafin info [-m] MODEL [options]",
    "Metadata, hyperparameters, tokenizer, tensors by type and role, and the memory plan. No weights\n"
    "are read.", NULL, 1};

static void print_header(const char *model, const deltafin_model *m) {
    deltafin_hparams hp;
    deltafin_gguf_info gi;
    deltafin_model_hparams(m, &hp);
    deltafin_model_gguf_info(m, &gi);
    const char *name = deltafin_model_meta_str(m, "general.name");
    printf("model:        %s\n", model);
    printf("name:         %s\n", name ? name : "(none)");
    printf("architecture: %s (GGUF v%d, %d tensors, %d KV pairs, %d file%s)\n", deltafin_model_arch(m), gi.version,
           gi.n_tensors, gi.n_kv, gi.n_files, gi.n_files > 1 ? "s" : "");
    printf("\nhyperparameters:\n");
    printf("  n_vocab %d, n_ctx_train %d, n_embd %d, n_layer %d\n", hp.n_vocab, hp.n_ctx_train, hp.n_embd, hp.n_layer);
    printf("  n_head %d, n_head_kv %d, head_dim k %d / v %d, n_rot %d, rope %s, freq_base %g, freq_scale %g%s\n",
           hp.n_head, hp.n_head_kv, hp.n_embd_head_k, hp.n_embd_head_v, hp.n_rot, hp.rope_neox ? "neox" : "norm",
           hp.rope_freq_base, hp.rope_freq_scale, hp.yarn ? " (yarn)" : "");
    printf("  rms_eps %g, kq_scale %g, n_ff %d\n", hp.rms_eps, hp.kq_scale, hp.n_ff);
    if (hp.n_expert)
        printf("  experts %d (used %d), n_ff_exp %d, shared width %d, norm_w %s, scale %g\n", hp.n_expert,
               hp.n_expert_used, hp.n_ff_exp, hp.n_ff_shexp, hp.expert_weights_norm ? "yes" : "no",
               hp.expert_weights_scale);
    if (hp.detail[0]) printf("  %s\n", hp.detail);
    if (hp.n_layer_nextn)
        printf("  NextN / MTP layers %d (the last blocks: loaded, never run)\n", hp.n_layer_nextn);
    if (hp.indexer_top_k)
        printf("  sparse attention: indexer %d heads x %d, top_k %d, %d of %d layers with their own indexer\n",
               hp.indexer_n_head, hp.indexer_head_size, hp.indexer_top_k, hp.indexer_full_layers,
               hp.n_layer - hp.n_layer_nextn);
    printf("\ntokenizer:    ");
    const deltafin_vocab *v = deltafin_model_vocab(m);
    if (v) {
        deltafin_vocab_info vi;
        deltafin_vocab_get_info(v, &vi);
        printf("%s%s%s, bos %d, eos %d, %d end-of-generation id%s\n", vi.type, *vi.pre ? ", pre " : "", vi.pre,
               deltafin_token_bos(m), deltafin_token_eos(m), vi.n_eog, vi.n_eog == 1 ? "" : "s");
    } else {
        printf("(none)\n");
    }
    const char *tmpl = deltafin_model_meta_str(m, "tokenizer.chat_template");
    printf("chat template: %s\n", tmpl ? "present" : "(none)");
}

/* tensors by type and role */
static int print_tensors(const deltafin_model *m) {
    const int nt = deltafin_type_count();
    uint64_t *ty = calloc((size_t)nt * 2, sizeof *ty), ro_n[DELTAFIN_ROLE_COUNT] = {0}, ro_b[DELTAFIN_ROLE_COUNT] = {0};
    if (!ty) return DELTAFIN_ERR_NOMEM;
    uint64_t *ty_n = ty, *ty_b = ty + nt;
    char b1[32];
    for (int i = 0; i < deltafin_model_n_tensors(m); i++) {
        deltafin_tensor_info t;
        if (deltafin_model_tensor(m, i, &t) != DELTAFIN_OK) continue;
        if (t.type >= 0 && t.type < nt) { ty_n[t.type]++; ty_b[t.type] += t.nbytes; }
        ro_n[t.role]++;
        ro_b[t.role] += t.nbytes;
    }
    printf("\ntensors by type:\n");
    for (int t = 0; t < nt; t++)
        if (ty_n[t]) printf("  %-8s %6llu tensors %12s\n", deltafin_type_name(t), (unsigned long long)ty_n[t],
                            deltafin_fmt_bytes(ty_b[t], b1, sizeof b1));
    printf("tensors by role:\n");
    for (int r = 0; r < DELTAFIN_ROLE_COUNT; r++)
        if (ro_n[r]) printf("  %-16s %6llu tensors %12s\n", deltafin_role_name(r), (unsigned long long)ro_n[r],
                            deltafin_fmt_bytes(ro_b[r], b1, sizeof b1));
    free(ty);
    return DELTAFIN_OK;
}

static void print_footprint(const deltafin_model *m, int n_ctx, int n_batch, int type_k, int type_v) {
    char b1[32], b2[32];
    const int ctx_train = deltafin_model_n_ctx_train(m);
    int ctx = n_ctx > 0 ? n_ctx : (ctx_train < 4096 ? ctx_train : 4096);
    if (n_batch <= 0) n_batch = 512;
    if (n_batch > ctx) n_batch = ctx;
    deltafin_footprint plan;
    deltafin_model_footprint(m, ctx, n_batch, &plan);
    printf("\nmemory plan:\n");
    printf("  dense weights (resident)   %12s\n", deltafin_fmt_bytes(plan.dense_bytes, b1, sizeof b1));
    printf("  routed experts             %12s", deltafin_fmt_bytes(plan.expert_bytes, b1, sizeof b1));
    if (plan.expert_bytes_one) printf("  (largest expert %s)", deltafin_fmt_bytes(plan.expert_bytes_one, b2, sizeof b2));
    printf("\n");
    if (!type_k && !type_v) {
        printf("  KV cache per token (F16)   %12s\n", deltafin_fmt_bytes(plan.kv_bytes_per_token, b1, sizeof b1));
    } else {
        char tn[32];
        snprintf(tn, sizeof tn, "(%s/%s)", deltafin_kv_type_name(type_k), deltafin_kv_type_name(type_v));
        printf("  KV cache per token %-15s %s\n", tn, deltafin_fmt_bytes(plan.kv_bytes_per_token, b1, sizeof b1));
    }
    if (plan.state_bytes) /* kimi-k3 KDA layers: conv + delta-rule state, per sequence */
        printf("  recurrent state per seq    %12s\n", deltafin_fmt_bytes(plan.state_bytes, b1, sizeof b1));
    printf("  KV cache at n_ctx %-7d  %12s%s\n", ctx, deltafin_fmt_bytes(plan.kv_bytes, b1, sizeof b1),
           plan.state_bytes ? " (incl. recurrent state + prompt snapshot)" : "");
    printf("  scratch (n_batch %d)%*s%12s\n", n_batch, n_batch >= 1000 ? 4 : n_batch >= 100 ? 5 : 6, "",
           deltafin_fmt_bytes(plan.scratch_bytes, b1, sizeof b1));
    printf("  all resident               %12s\n",
           deltafin_fmt_bytes(plan.dense_bytes + plan.expert_bytes + plan.kv_bytes + plan.scratch_bytes, b1, sizeof b1));
}

/* the plan run would make at --mem-limit (dense_stream.c, plan.c) */
static void print_limit_plan(deltafin_model *m, uint64_t mem_limit, int n_ctx, int n_batch) {
    char b1[32], b2[32];
    deltafin_limit_plan lp;
    deltafin_model_plan_limit_at(m, mem_limit, n_ctx, n_batch, 0, &lp);
    printf("\nat --mem-limit %s (KV and scratch at the run's planned context %d):\n",
           deltafin_fmt_bytes(mem_limit, b1, sizeof b1), lp.n_ctx);
    if (lp.status < 0) {
        printf("  refused: %s\n", lp.error);
        return;
    }
    printf("  routed experts             %s\n", !deltafin_model_n_expert(m) ? "(none)" : lp.experts_stream ?
           "streamed (expert cache)" : "resident");
    printf("  %s\n", lp.dense_plan);
    if (lp.dense_layers_streamed)
        printf("  dense resident + buffers   %12s\n", deltafin_fmt_bytes(lp.dense_resident_bytes, b1, sizeof b1));
    if (!lp.cache_planned) return;
    if (lp.cache_status == DELTAFIN_OK)
        printf("  expert cache               %12s  (%d slots of %s, %.2f%% of the %d experts)\n",
               deltafin_fmt_bytes(lp.cache_bytes, b1, sizeof b1), lp.n_slots,
               deltafin_fmt_bytes(lp.slot_bytes, b2, sizeof b2), 100.0 * lp.frac_resident, lp.n_experts_total);
    else
        printf("  expert cache               refused: %s\n", lp.cache_error);
}

static int info_model(const char *model, int n_ctx, int n_batch, bool batch_chosen, uint64_t mem_limit, int type_k,
                      int type_v) {
    deltafin_model *m = NULL;
    if (deltafin_model_load_meta(model, &m) < 0) {
        fprintf(stderr, "info: %s\n", deltafin_errmsg());
        return 1;
    }
    if ((type_k || type_v) && deltafin_model_set_cache_types(m, type_k, type_v) < 0) {
        fprintf(stderr, "info: %s\n", deltafin_errmsg());
        deltafin_model_free(m);
        return 1;
    }
    print_header(model, m);
    int rc = print_tensors(m);
    print_footprint(m, n_ctx, n_batch, type_k, type_v);
    /* as run: the chunk is the plan's to shrink under pressure unless -b was given */
    if (mem_limit) print_limit_plan(m, mem_limit, n_ctx, batch_chosen ? n_batch : 0);
    deltafin_model_free(m);
    return rc ? 1 : 0;
}

int cmd_info(int argc, char **argv) {
    df_settings S;
    int rc = df_cli_parse(&k_info, argc, argv, &S);
    if (rc != DF_CLI_GO) return rc;
    const char *model = df_cli_model_arg(&k_info, &S, true, &rc);
    if (!model) return rc;
    if (df_cli_given(&S, &k_info, "--mem-limit") && !S.mem_limit)
        return df_cli_usage_error(&k_info, "--mem-limit must be more than 0");
    return info_model(model, S.n_ctx, S.n_batch, S.n_batch_chosen, S.mem_limit, S.cache_type_k, S.cache_type_v);
}
