/* hash.h — non-cryptographic hashing. XXH64 (seed 0 for packed records) as specified by
 * its author; the bytes it returns are part of the pack format. Reentrant. */
#ifndef DF_HASH_H
#define DF_HASH_H
#include <stddef.h>
#include <stdint.h>

uint64_t df_xxh64(const void *data, size_t len, uint64_t seed);
#endif
