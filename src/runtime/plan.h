/* memplan.h — the memory plan: how much of a memory limit goes to dense weights, KV cache,
 * scratch and overhead, and how many expert cache slots the rest buys; plus the glue that
 * decides at model load whether routed experts stream from disk and attaches the expert store.
 * Invariant: the plan never assigns more than the limit; it refuses (DF_ERR_RANGE, message
 * with the bytes needed) only when the smallest working set does not fit.
 * Threading: pure functions, except df_stream_* which act on one model during its load. */
#ifndef DF_MEMPLAN_H
#define DF_MEMPLAN_H
#include "base/util.h"

typedef struct {
    uint64_t dense_bytes;        /* resident non-expert weights */
    uint64_t kv_bytes;           /* KV cache at the planned context */
    uint64_t scratch_bytes;      /* activations / buffers */
    uint64_t overhead_bytes;     /* runtime, I/O buffers, slack; 0: 64 MiB */
    uint64_t expert_total_bytes; /* all routed experts as stored on disk */
    uint64_t slot_bytes;         /* one expert cache slot (largest expert, 4 KiB-rounded) */
    int n_experts_total;         /* (layer, expert) pairs with weights */
    int min_slots;               /* smallest working set in slots; <= 0: 2 */
    uint64_t mem_limit;          /* 0: available memory - mem_reserve */
    uint64_t mem_reserve;        /* with mem_limit == 0; 0: 1 GiB */
    uint64_t mem_available;      /* 0: df_mem_available() (tests inject a value) */
} df_memplan_in;

typedef struct {
    df_memplan_in in;
    uint64_t limit;              /* effective limit */
    bool limit_from_ram;         /* limit = available - reserve */
    uint64_t fixed_bytes;        /* dense + kv + scratch + overhead */
    uint64_t cache_bytes;        /* expert cache = n_slots * slot_bytes */
    int n_slots;
    bool all_resident;           /* every expert fits */
    double frac_resident;        /* n_slots / n_experts_total */
    uint64_t need_min;           /* fixed + min_slots * slot_bytes */
} df_memplan;

/* Bytes this process may still use: min(MemAvailable, memory cgroup limit - usage). */
uint64_t df_mem_available(void);

int df_memplan_compute(const df_memplan_in *in, df_memplan *out);
/* Multi-line human-readable plan. */
const char *df_memplan_str(const df_memplan *p, char *buf, size_t cap);

/* ---- streaming setup (used by model load and `deltafin run`) ---------------------------- */
struct deltafin_model;
/* Called by df_model_load after binding, before loading data: decides whether routed
 * experts stay on disk. True when the model has routed experts and either they do not fit in
 * the memory limit with everything else, io_engine names an engine other than "auto", or
 * $DELTAFIN_STREAM=1 ($DELTAFIN_STREAM=0 forces resident). */
int df_stream_decide(struct deltafin_model *m, bool *stream);
/* Records the plan of a model whose experts stay resident (m->plan). */
void df_plan_resident(struct deltafin_model *m);
/* Builds the plan, creates the expert store over the model's files and installs it as the
 * model's provider. Logs the plan (INFO). */
int df_stream_attach(struct deltafin_model *m);
/* After load (run/bench options): prefetch mode (DF_PREFETCH_*, -1 = keep), hot set file and
 * preload list (NULL = none). No-op (DF_OK) when the model is not streaming. */
int df_stream_configure(struct deltafin_model *m, int prefetch, const char *hot_file, const char *preload);
/* The plan's sizes (KV, scratch, dense, experts) at the planned context and batch. */
struct df_mem_plan;
void df_memplan_model(const struct deltafin_model *m, struct df_mem_plan *mp);
/* Expert-store slot bytes and (layer, expert) pairs the model would stream (before the store exists). */
int df_stream_slot_info(struct deltafin_model *m, uint64_t *slot_bytes, int *n_pairs);
/* The model's expert store if it streams, else NULL. */
struct df_store *df_stream_store(struct deltafin_model *m);
#endif
