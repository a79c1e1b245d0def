#!/usr/bin/python3
# q8_flips.py LLAMA.f32 DELTAFIN.f32 [BLOCK=32] — where two nearly equal activations (tensors
# dumped by `llama_oracle --dump` and a debug build of deltafin) quantize differently for a
# Q8_0 (BLOCK 32) or Q8_K (BLOCK 256) matmul: a quantum that rounds the other way, or an F16
# block scale d = amax/127 that lies on an F16 rounding midpoint. Both are discrete near-ties.
import sys, numpy as np
# nearly equal activations; prints the blocks whose quanta differ and how close to .5 they were
a = np.fromfile(sys.argv[1], np.float32); b = np.fromfile(sys.argv[2], np.float32)
bs = int(sys.argv[3]) if len(sys.argv) > 3 else 32
print(f"max|a-b| {np.abs(a-b).max():.3e}")
for blk in range(a.size // bs):
    xa = a[blk*bs:(blk+1)*bs]; xb = b[blk*bs:(blk+1)*bs]
    ia = np.float32(127) / np.abs(xa).max(); ib = np.float32(127) / np.abs(xb).max()
    qa = np.rint(xa * ia); qb = np.rint(xb * ib)
    for j in np.nonzero(qa != qb)[0]:
        print(f"block {blk} elem {j}: x*127/amax = {xa[j]*ia:.7f} (llama.cpp) vs {xb[j]*ib:.7f} (deltafin); x differs by {xa[j]-xb[j]:.2e}")
    if bs == 32:  # Q8_0 stores d = amax/127 as F16: a midpoint there flips the whole block's scale
        da, db = np.abs(xa).max() / np.float32(127), np.abs(xb).max() / np.float32(127)
        if np.float16(da) != np.float16(db):
            print(f"block {blk}: F16 scale d = {da:.9g} (llama.cpp) vs {db:.9g} (deltafin) round to "
                  f"{float(np.float16(da)):.7g} vs {float(np.float16(db)):.7g}")
