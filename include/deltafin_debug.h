/* deltafin_debug.h — internals for tools that inspect the engine rather than run a model:
 * `deltafin info` (hyperparameters, tensor table, footprint, the plan at a memory limit),
 * `deltafin doctor` (disk and I/O-engine measurements, the speed estimate's inputs) and
 * `deltafin bench kernels` (matrix-vector kernels timed on buffers). Everything here is
 * read-only with respect to a loaded model and may change between versions: an embedding
 * program should need only deltafin.h. Status codes and errors as in deltafin.h. */
#ifndef DELTAFIN_DEBUG_H
#define DELTAFIN_DEBUG_H

#include "deltafin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- a model's description (no weights read) ---------------------------------------------- */
/* Open, bind and shape-check a model without reading any weight bytes (`info`, `doctor`).
 * Such a model answers the queries of this header and deltafin.h's metadata, vocabulary and
 * plan functions; it cannot create contexts. Free with deltafin_model_free. */
int deltafin_model_load_meta(const char *path, deltafin_model **out);
/* KV cache types (DELTAFIN_KV_*) for the footprint and plans of a meta model (`info -ctk`):
 * checked against the architecture as a load would check them. */
int deltafin_model_set_cache_types(deltafin_model *m, int type_k, int type_v);

typedef struct {
    int n_vocab, n_ctx_train, n_embd, n_layer;
    int n_head, n_head_kv, n_embd_head_k, n_embd_head_v, n_rot;
    bool rope_neox;               /* NEOX rotation (else the original pairs) */
    float rope_freq_base, rope_freq_scale;
    bool yarn;                    /* YaRN context extension in use */
    float rms_eps, kq_scale;
    int n_ff;
    int n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool expert_weights_norm;
    float expert_weights_scale;
    char detail[400];             /* the architecture's own hyperparameters in words, "" if none */
    int n_layer_nextn;            /* last blocks that are NextN / MTP heads (loaded, never run) */
    /* DeepSeek Sparse Attention (deepseek32, glm-dsa): indexer heads x key size, keys kept per
     * query, layers with their own indexer (the others reuse the previous full layer's keys) */
    int indexer_n_head, indexer_head_size, indexer_top_k, indexer_full_layers;
} deltafin_hparams;
void deltafin_model_hparams(const deltafin_model *m, deltafin_hparams *out);

typedef struct {
    int version;                  /* GGUF version */
    int n_tensors, n_kv, n_files; /* n_files: parts of a split model */
    const char *path;             /* the first file */
} deltafin_gguf_info;
void deltafin_model_gguf_info(const deltafin_model *m, deltafin_gguf_info *out);

/* What a tensor is for (info's "tensors by role"). */
enum {
    DELTAFIN_ROLE_EMBD, DELTAFIN_ROLE_OUTPUT, DELTAFIN_ROLE_ATTN, DELTAFIN_ROLE_NORM, DELTAFIN_ROLE_ROUTER,
    DELTAFIN_ROLE_EXPERTS, DELTAFIN_ROLE_SHARED, DELTAFIN_ROLE_FFN, DELTAFIN_ROLE_OTHER, DELTAFIN_ROLE_COUNT
};
const char *deltafin_role_name(int role); /* "token embedding", "routed experts" ... */
typedef struct {
    const char *name;
    int type;                     /* GGUF type id (deltafin_type_name) */
    uint64_t nbytes;              /* bytes in the file */
    int role;                     /* DELTAFIN_ROLE_* */
} deltafin_tensor_info;
int deltafin_model_n_tensors(const deltafin_model *m);
int deltafin_model_tensor(const deltafin_model *m, int i, deltafin_tensor_info *out);

/* What the model needs at a context and batch (no limit applied). */
typedef struct {
    uint64_t dense_bytes;         /* non-expert weights */
    uint64_t expert_bytes;        /* routed experts, all layers */
    uint64_t expert_bytes_one;    /* the largest single expert (gate + up + down) */
    uint64_t kv_bytes_per_token;  /* all layers, K + V, in the model's cache types */
    uint64_t kv_bytes;            /* at n_ctx, plus the recurrent state twice (state + snapshot) */
    uint64_t state_bytes;         /* recurrent state per sequence (kimi-k3 KDA layers), 0 if none */
    uint64_t scratch_bytes;       /* activations for n_batch tokens */
} deltafin_footprint;
void deltafin_model_footprint(const deltafin_model *m, int n_ctx, int n_batch, deltafin_footprint *out);

/* The plan `run --mem-limit LIMIT` would make for a model (`info --mem-limit`). */
typedef struct {
    int n_ctx;                    /* the context run plans KV and scratch for */
    int status;                   /* < 0: refused (error says why; nothing below is set) */
    char error[512];
    bool experts_stream;          /* routed experts go to the expert cache */
    char dense_plan[512];         /* "dense: ..." one line */
    int dense_layers_streamed;
    uint64_t dense_resident_bytes;/* resident part + layer buffers */
    bool cache_planned;           /* experts stream and the slots are known: the fields below */
    int cache_status;             /* < 0: the cache is refused (cache_error) */
    char cache_error[512];
    uint64_t cache_bytes, slot_bytes;
    int n_slots, n_experts_total;
    double frac_resident;
} deltafin_limit_plan;
/* Fills *out (also when the plan is refused: out->status); returns DELTAFIN_OK. Uses the meta
 * model's own parameters with mem_limit replaced. */
int deltafin_model_plan_limit(deltafin_model *m, uint64_t mem_limit, deltafin_limit_plan *out);
/* The same for a run with this context, prompt chunk and number of sequences (0: the defaults,
 * as deltafin_model_params): what `info -c N -b B --mem-limit X` shows. */
int deltafin_model_plan_limit_at(deltafin_model *m, uint64_t mem_limit, int n_ctx, int n_batch, int n_seq,
                                 deltafin_limit_plan *out);

/* Inputs of `doctor`'s speed estimate at a memory limit, context min(training context, 4096),
 * batch 512, dense layers streaming as run would plan them. */
typedef struct {
    int n_ctx;
    uint64_t mem_limit;
    uint64_t dense_bytes;         /* dense weights read per token */
    double active_expert_bytes;   /* routed bytes one token touches (average expert) */
    int n_expert, n_expert_used;
    int status;                   /* < 0: does not fit (error) */
    char error[512];
    uint64_t cache_bytes;
    double cached_frac;           /* share of the experts the cache holds (1: all, or no experts) */
    int dense_layers_streamed;
    uint64_t dense_read_per_token;
    char dense_plan[512];         /* "dense: ..." when layers stream */
} deltafin_speed_inputs;
int deltafin_model_speed_inputs(deltafin_model *m, uint64_t mem_limit, deltafin_speed_inputs *out);
/* The largest single read the expert store will issue for this model (4 KiB-rounded; 0 when it
 * has no routed experts): the request size `--io auto` measures with. */
uint64_t deltafin_model_expert_read_bytes(const deltafin_model *m);

/* ---- disk and I/O engines ------------------------------------------------------------------- */
/* GB/s of random `probe`-byte reads of `path` with `qd` in flight for about `secs` with the
 * named engine (page cache dropped first); < 0 when the engine cannot run here. */
double deltafin_disk_read_gbps(const char *path, const char *engine, int qd, uint64_t probe, double secs);
/* The measurement `--io auto` makes (8 parallel reads per engine) and its winner. */
typedef struct {
    int n;                        /* engines measured */
    const char *names[8];
    double gbps[8];
    const char *best;
    double best_gbps;
    uint64_t probe;
    char key[128];                /* the profile key: "dev=MAJ:MIN probe=BYTES" */
    int engine_ids[8], best_id;   /* internal */
} deltafin_io_measurement;
int deltafin_io_measure(const char *path, uint64_t probe, deltafin_io_measurement *out);
/* Store the winner in the profile `--io auto` reads (profile NULL: $DELTAFIN_IO_PROFILE, else
 * $XDG_CACHE_HOME/deltafin/io-profile, else ~/.cache/deltafin/io-profile); other lines are
 * kept. The path written goes to saved (cap bytes). */
int deltafin_io_profile_save(const char *profile, const deltafin_io_measurement *ms, char *saved, size_t cap);

/* ---- kernel benchmark ----------------------------------------------------------------------- */
typedef struct deltafin_kbench deltafin_kbench;
/* isa: "ref" | "avx2" | "avx512" | "neon" or NULL for the best; n_threads <= 0: all cores. */
int deltafin_kbench_create(const char *isa, int n_threads, deltafin_kbench **out);
void deltafin_kbench_free(deltafin_kbench *kb);
int deltafin_kbench_threads(const deltafin_kbench *kb);
/* Median cost of one pool dispatch + barrier with one empty task per thread, microseconds. */
double deltafin_kbench_dispatch_us(deltafin_kbench *kb);
/* Best-of-reps streaming read bandwidth over a `bytes` buffer (allocated on the first call and
 * kept for the matvec passes), bytes/s; < 0 if it cannot be allocated. */
double deltafin_kbench_bandwidth(deltafin_kbench *kb, uint64_t bytes, int reps);
typedef struct {
    int type;
    double gbs;                   /* weight GB/s for one activation row (best of reps) */
    double bw_local;              /* best bandwidth of the passes alternated with it, bytes/s */
    double us_per_call;           /* one matrix-vector product */
    double gbs_tok;               /* weight GB/s while serving n_tok rows (n_tok > 1) */
} deltafin_kbench_result;
/* A matrix of about the bandwidth buffer's size in `type` (the layout a loaded model gets:
 * Q4_K repacked), n_in columns; its passes alternate with bandwidth passes. */
int deltafin_kbench_matvec(deltafin_kbench *kb, int type, int64_t n_in, int reps, int n_tok,
                           deltafin_kbench_result *out);

#ifdef __cplusplus
}
#endif
#endif
