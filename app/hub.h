/* hub.h — `org/repo:QUANT` through the Hugging Face Hub's file list (libcurl + cJSON), for
 * `deltafin pull`: GET {endpoint}/api/models/ORG/REPO/tree/REV?recursive=true (every page, by
 * its Link: rel="next" header), then the .gguf file whose name carries QUANT as a word (e.g.
 * Q4_K_M in "Model-Q4_K_M.gguf" or in a "Q4_K_M/" folder), or every part of the split model
 * that does, each with its download URL ({endpoint}/ORG/REPO/resolve/REV/PATH) and the SHA-256
 * the listing gives (lfs.oid). The endpoint is $HF_ENDPOINT (a mirror, or a test server), else
 * https://huggingface.co. Threading: none (one call at a time). */
#ifndef DF_HUB_H
#define DF_HUB_H
#include "app/download.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    char path[1024];          /* in the repository, e.g. "Q4_K_M/Model-Q4_K_M-00001-of-00002.gguf" */
    char url[4096];
    char sha256[65];          /* "" when the listing has none (a file not stored in LFS) */
    uint64_t size;
} df_hub_file;

/* True if spec looks like ORG/REPO:QUANT (or ORG/REPO, meaning ORG/REPO:Q4_K_M as llama.cpp's
 * -hf does); fills org/repo ("org/repo") and quant. */
bool df_hub_spec(const char *spec, char *repo, size_t repo_cap, char *quant, size_t quant_cap);
/* Resolve repo + quant to *files (caller frees) / *n (1, or every part of a split model, in
 * order). Errors name what was asked and list the quantizations the repository has when none
 * matches or several files do. o: bearer token, timeouts (may be NULL). */
int df_hub_resolve(const char *repo, const char *quant, const df_download_opts *o, df_hub_file **files, int *n);
/* The endpoint in use ($HF_ENDPOINT or https://huggingface.co), without a trailing slash. */
const char *df_hub_endpoint(char *buf, size_t cap);
#endif
