/* sysmem.h — memory available to this process (the default memory limit comes from it). */
#ifndef DF_SYSMEM_H
#define DF_SYSMEM_H
#include <stdint.h>

/* Bytes this process may still use: min(MemAvailable, memory cgroup limit - usage). */
uint64_t df_mem_available(void);
#endif
