/* hash.c — XXH64, the checksum of packed expert records (docs/pack-format.md) and of the model
 * identity checked across MPI ranks: libxxhash's implementation (Debian libxxhash-dev). */
#include "base/hash.h"
#include <xxhash.h>

uint64_t df_xxh64(const void *data, size_t len, uint64_t seed) {
    return (uint64_t)XXH64(data, len, (XXH64_hash_t)seed);
}
