/* sysmem.h — memory available to this process (the default memory limit comes from it). */
#ifndef DF_SYSMEM_H
#define DF_SYSMEM_H
#include <stdint.h>

/* Bytes this process may still use: min(MemAvailable, memory cgroup limit - usage). */
uint64_t df_mem_available(void);
/* mlock n bytes at p (what: "the dense weights", ... for the message). DF_ERR_RANGE naming
 * RLIMIT_MEMLOCK and what is locked already when the kernel refuses. */
int df_mlock(const void *p, uint64_t n, const char *what);
#endif
