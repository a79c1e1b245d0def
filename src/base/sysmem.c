/* sysmem.c — how much memory this process may still use: MemAvailable, capped by the memory
 * cgroup (v1 or v2) the process is in. Read on demand; thread-safe. */
#include "base/sysmem.h"
#include "base/util.h"
#include <errno.h>
#include <sys/mman.h>
#include <sys/resource.h>

static uint64_t read_u64_file(const char *path, bool *ok) {
    char *d = NULL;
    size_t n = 0;
    *ok = false;
    if (df_read_file(path, &d, &n) != DF_OK) { df_err_clear(); return 0; }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(d, &end, 10);
    *ok = end != d && !errno;
    free(d);
    return v;
}

/* Memory cgroup headroom (v1 or v2) of this process; UINT64_MAX if unlimited/unknown. */
static uint64_t cgroup_headroom(void) {
    char *d = NULL;
    size_t n = 0;
    if (df_read_file("/proc/self/cgroup", &d, &n) != DF_OK) { df_err_clear(); return UINT64_MAX; }
    uint64_t best = UINT64_MAX;
    for (char *line = d; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2) {
            char lim[1200], use[1200];
            bool v1 = !strncmp(c1 + 1, "memory:", 7) || (c2 - c1 - 1 == 6 && !strncmp(c1 + 1, "memory", 6));
            bool v2 = c2 == c1 + 1 && line[0] == '0';
            if (v1) {
                snprintf(lim, sizeof lim, "/sys/fs/cgroup/memory%s/memory.limit_in_bytes", c2 + 1);
                snprintf(use, sizeof use, "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", c2 + 1);
            } else if (v2) {
                snprintf(lim, sizeof lim, "/sys/fs/cgroup%s/memory.max", c2 + 1);
                snprintf(use, sizeof use, "/sys/fs/cgroup%s/memory.current", c2 + 1);
            }
            if (v1 || v2) {
                bool ok1, ok2;
                uint64_t l = read_u64_file(lim, &ok1), u = read_u64_file(use, &ok2);
                if (ok1 && l < (1ull << 60)) {
                    uint64_t h = ok2 && u < l ? l - u : 0;
                    if (h < best) best = h;
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    free(d);
    return best;
}

uint64_t df_mem_available(void) {
    char *d = NULL;
    size_t n = 0;
    uint64_t avail = 0;
    if (df_read_file("/proc/meminfo", &d, &n) == DF_OK) {
        char *p = strstr(d, "MemAvailable:");
        if (p) avail = strtoull(p + 13, NULL, 10) * 1024;
        free(d);
    } else df_err_clear();
    uint64_t cg = cgroup_headroom();
    return cg < avail ? cg : avail;
}


int df_mlock(const void *p, uint64_t n, const char *what) {
    static uint64_t locked; /* bytes locked so far by this process (for the message) */
    if (!p || !n) return DF_OK;
    if (mlock(p, (size_t)n) == 0) {
        __atomic_add_fetch(&locked, n, __ATOMIC_RELAXED);
        return DF_OK;
    }
    int e = errno;
    struct rlimit rl;
    char a[32], b[32], c[32];
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        return df_err(DF_ERR_RANGE, "--mlock: cannot lock %s of %s (%s): RLIMIT_MEMLOCK is %s and %s are locked "
                      "already; raise it (ulimit -l, /etc/security/limits.conf, LimitMEMLOCK= in systemd) or run "
                      "without --mlock", df_fmt_bytes(n, a, sizeof a), what, strerror(e),
                      df_fmt_bytes((uint64_t)rl.rlim_cur, b, sizeof b),
                      df_fmt_bytes(__atomic_load_n(&locked, __ATOMIC_RELAXED), c, sizeof c));
    return df_err(DF_ERR_RANGE, "--mlock: cannot lock %s of %s: %s", df_fmt_bytes(n, a, sizeof a), what, strerror(e));
}
