/* loader.h — loading a model with internal options (tests and tools beyond the public
 * deltafin_model_load). */
#ifndef DF_LOADER_H
#define DF_LOADER_H
#include "model/model.h"
#include "runtime/plan.h"

/* Load flags. */
enum { DF_LOAD_SKIP_EXPERTS = 1, /* leave routed expert tensors on disk (a store plugs in) */
       DF_LOAD_NO_TOKENIZER = 2,
       DF_LOAD_META_ONLY = 4,    /* bind and validate only; no weights read (info) */
       DF_LOAD_DIST_WORKER = 8   /* an MPI worker (dist/dist.h): its share of the experts only */ };

/* The memory plan for m's current parameters (m->params: limit, context, ...) without
 * changing m: what `info` / `doctor` show at another limit. */
int df_loader_plan(df_model *m, df_plan *out);

int df_model_load(const char *path, const deltafin_model_params *p, int flags, df_model **out);
#endif
