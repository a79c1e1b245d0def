/* pack.h — the expert-major streaming layout (docs/pack-format.md).
 * A packed model is one GGUF file (general.alignment = 4096): the source's KVs and dense
 * tensors unchanged, plus `deltafin.pack.*` KVs naming the original routed-expert tensors
 * (name, type, shape), a tensor `deltafin.pack.experts` (I8) holding one 4 KiB-aligned record
 * per (layer, expert) = gate|up|down (or fused gate_up|down), and a tensor
 * `deltafin.pack.index` (I64 {8, n_layer * n_expert}) with each record's offset, length,
 * XXH64 and part offsets. Version 2 adds `deltafin.pack.sums` (I64 {4, n_rows}, last): an XXH64
 * of the header and tensor table, of every other tensor in chunks of deltafin.pack.sum_chunk
 * bytes, and of the table itself, so every byte of the file but the padding is checked.
 * Version 1 files (records only) are still read.
 * Writing goes to OUT.tmp and is renamed at the end, so an interrupted pack never looks
 * complete. Threading: df_pack_write is single-threaded; a df_pack is read-only after open. */
#ifndef DF_PACK_H
#define DF_PACK_H
#include "format/gguf.h"

#define DF_PACK_VERSION 2         /* written; 1 and 2 are read */
#define DF_PACK_SUM_CHUNK (64u << 20) /* dense tensors are checksummed in chunks of this size */

/* The parts of a routed expert. */
enum { DF_EXPERT_GATE = 0, DF_EXPERT_UP = 1, DF_EXPERT_DOWN = 2, DF_EXPERT_NPARTS = 3 };

/* Where to find expert e of layer l part p in the model files (for streaming providers). */
typedef struct {
    int shard;          /* file index (df_gguf shards, or a packed file) */
    uint64_t offset;    /* absolute byte offset */
    uint64_t nbytes;
    int type;
} df_expert_loc;

/* One contiguous record holding all parts of one (layer, expert) of a packed file. */
typedef struct {
    int file;
    uint64_t offset, nbytes;
    uint64_t xxh64;           /* XXH64(seed 0) of the nbytes */
} df_expert_record;

typedef struct {
    bool progress_tty;        /* draw a progress bar (stderr is a tty) */
    bool progress_lines;      /* else: a line every ~5 s (0 = quiet) */
    uint64_t fail_after;      /* tests: fail after this many records (0 = never) */
    int version;              /* tests: write this pack version (0 = DF_PACK_VERSION) */
} df_pack_opts;

/* Rewrite `in_path` (a GGUF with routed experts) into `out_path`. */
int df_pack_write(const char *in_path, const char *out_path, const df_pack_opts *o);

typedef struct df_pack df_pack;
/* DF_ERR_NOTFOUND if g is not a packed file; DF_ERR_FORMAT if its pack data is malformed. */
int df_pack_open(const df_gguf *g, df_pack **out);
void df_pack_close(df_pack *p);
bool df_pack_is_packed(const df_gguf *g);

int df_pack_n_layers(const df_pack *p);
int df_pack_n_experts(const df_pack *p);
/* Type and shape {ne0, ne1, n_expert} of an original expert tensor, e.g.
 * "blk.3.ffn_down_exps.weight". DF_ERR_NOTFOUND if the pack has no such tensor. */
int df_pack_expert_tensor(const df_pack *p, const char *name, int *type, int64_t ne[3]);
/* Fill locs [L*E*3] (fused gate_up: gate = first half, up = second half) and records [L*E]
 * (may be NULL) for the expert store. Shard = the packed file's shard index. */
int df_pack_locs(const df_pack *p, df_expert_loc *locs, df_expert_record *records);
/* One part's location (same values as df_pack_locs). DF_ERR_INVALID for bad indices or a
 * layer without that part. */
int df_pack_expert_loc(const df_pack *p, int layer, int expert, int part, df_expert_loc *out);
/* Number of original expert tensors and the i-th one's name/type/shape/bytes. */
int df_pack_n_tensors(const df_pack *p);
int df_pack_tensor_info(const df_pack *p, int i, const char **name, int *type, int64_t ne[3], uint64_t *nbytes);
/* Read every record and check its checksum; first mismatch -> DF_ERR_CHECKSUM naming layer,
 * expert, file and offset. *n_checked receives the number of records checked. */
int df_pack_check(const df_gguf *g, const df_pack *p, uint64_t *n_checked);

/* ---- version 2: checksums over the rest of the file ---------------------------------------
 * One row of deltafin.pack.sums: what = DF_PACK_SUM_HEADER (bytes [0, data start) of the file:
 * header, KVs, tensor table, padding), a tensor's index in the file's tensor table (bytes
 * [offset, offset + nbytes) of that tensor's data), or DF_PACK_SUM_TABLE (the rows before it). */
enum { DF_PACK_SUM_HEADER = -1, DF_PACK_SUM_TABLE = -2 };
typedef struct { int64_t what; uint64_t offset, nbytes, xxh64; } df_pack_sum;
int df_pack_version(const df_pack *p);
/* Tensors of the file that are the pack's own (experts, index, and the sums of version 2). */
int df_pack_n_own_tensors(const df_pack *p);
/* Every row (NULL, 0 for version 1). When the table does not fit the file's tensor table the
 * rows are withheld too and *err (may be NULL) says why; df_pack_check_meta then fails. */
const df_pack_sum *df_pack_sums(const df_pack *p, int *n, const char **err);
/* Rows withheld because the header and tensor table disagree with a table that is intact
 * (the header was changed), rather than a damaged table. */
bool df_pack_header_changed(const df_pack *p);
/* Rows of tensor t (a tensor of the df_gguf the pack was opened on); 0 when none protect it
 * (version 1, the expert region, the table itself). */
int df_pack_tensor_sums(const df_pack *p, const df_gguf_tensor *t, const df_pack_sum **rows);
/* Check t's bytes (all nbytes, in memory) against its rows: DF_ERR_CHECKSUM naming the tensor,
 * file, absolute offset and the two hashes. DF_OK when nothing protects t. */
int df_pack_check_tensor(const df_pack *p, const df_gguf_tensor *t, const void *data);
/* Check the table's own row, the header and tensor table (read from the file) and the expert
 * index (as read at open). DF_OK for version 1 (nothing to check). */
int df_pack_check_meta(const df_pack *p);
/* Bytes the pack does not protect (version 1: header, index and every dense tensor; version 2:
 * 0), and how many tensors those are; for `verify`. */
uint64_t df_pack_unprotected(const df_pack *p, int *n_tensors, uint64_t *header_bytes);
/* When df_pack_open refuses a file: check the header against its checksum table directly (the
 * table must be intact). DF_ERR_CHECKSUM (*got, *want) if the header was changed, DF_OK if it
 * matches, DF_ERR_NOTFOUND if there is no trustworthy table. */
int df_pack_check_header_raw(const df_gguf *g, uint64_t *got, uint64_t *want);
#endif
