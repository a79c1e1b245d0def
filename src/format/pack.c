/* pack.c — write and read the expert-major streaming layout (see pack.h and
 * docs/pack-format.md). Invariant: a file at the output path is always complete (written as
 * OUT.tmp, fsynced, renamed); every index entry of an opened pack lies inside its region. */
#include "format/pack.h"
#include "base/hash.h"
#include "format/ggml_types.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

enum { K_GATE = 0, K_UP = 1, K_DOWN = 2, K_GATE_UP = 3, K_N = 4 };
static const char *g_kind[K_N] = {"gate", "up", "down", "gate_up"};
static int kind_slot(int k) { return k == K_GATE_UP ? DF_EXPERT_GATE : k; }
enum { IDX_W = 8, PART_ALIGN = 64, REC_ALIGN = 4096 };

/* "blk.L.ffn_KIND_exps.weight" -> layer, kind; false otherwise */
static bool parse_expert_name(const char *name, int *layer, int *kind) {
    int l, n = 0;
    char k[16];
    if (sscanf(name, "blk.%d.ffn_%15[a-z_]%n", &l, k, &n) != 2 || l < 0) return false;
    size_t kl = strlen(k);
    if (kl <= 5 || strcmp(k + kl - 5, "_exps") || strcmp(name + n, ".weight")) return false;
    k[kl - 5] = 0;
    for (int i = 0; i < K_N; i++)
        if (!strcmp(k, g_kind[i])) { *layer = l; *kind = i; return true; }
    return false;
}

typedef struct {
    int type;
    int64_t ne[3];
    uint64_t slice;           /* bytes per expert */
    const df_gguf_tensor *src; /* writer only */
    bool present;
} pk_tensor;

struct df_pack {
    int n_layer, n_expert;
    pk_tensor *t;             /* [n_layer][K_N] */
    int64_t *index;           /* [n_layer * n_expert][IDX_W] */
    const df_gguf_tensor *region;
    char **names;             /* original tensor names, for df_pack_expert_tensor */
    int *name_layer, *name_kind;
    int n_names;
};

bool df_pack_is_packed(const df_gguf *g) { return df_gguf_find(g, "deltafin.pack.version") != NULL; }

/* record layout of (layer) given which kinds are present: part offsets, payload length */
static uint64_t record_layout(const pk_tensor *lt, int64_t off[DF_EXPERT_NPARTS]) {
    uint64_t o = 0;
    for (int s = 0; s < DF_EXPERT_NPARTS; s++) off[s] = -1;
    for (int k = 0; k < K_N; k++) {
        if (!lt[k].present) continue;
        int s = kind_slot(k);
        o = df_pad(o, PART_ALIGN);
        off[s] = (int64_t)o;
        o += lt[k].slice;
    }
    return o;
}

/* ---- writer -------------------------------------------------------------------------------- */

typedef struct {
    const df_pack_opts *o;
    uint64_t total, done, t0, last;
    const char *out;
} progress;

static void progress_show(progress *p, bool final) {
    if (!p->o || (!p->o->progress_tty && !p->o->progress_lines)) return;
    uint64_t now = df_time_ns();
    if (!final && p->o->progress_tty && now - p->last < 200000000ull) return;
    if (!final && !p->o->progress_tty && now - p->last < 5000000000ull) return;
    p->last = now;
    double secs = (now - p->t0) / 1e9, frac = p->total ? (double)p->done / p->total : 1;
    double rate = secs > 0 ? p->done / secs / 1e6 : 0;
    double eta = rate > 0 ? (p->total - p->done) / 1e6 / rate : 0;
    char a[32], b[32];
    if (p->o->progress_tty) {
        int w = 30, fill = (int)(frac * w);
        fprintf(stderr, "\rpack: [%.*s%*s] %5.1f%% %s / %s %.0f MB/s ETA %.0fs ", fill,
                "##############################", w - fill, "", 100 * frac, df_fmt_bytes(p->done, a, sizeof a),
                df_fmt_bytes(p->total, b, sizeof b), rate, eta);
        if (final) fputc('\n', stderr);
    } else {
        fprintf(stderr, "pack: %.1f%% %s / %s %.0f MB/s ETA %.0fs\n", 100 * frac, df_fmt_bytes(p->done, a, sizeof a),
                df_fmt_bytes(p->total, b, sizeof b), rate, eta);
    }
}

static int copy_tensor(df_gguf_writer *w, int fd, int idx, const df_gguf *g, const df_gguf_tensor *t, uint8_t *buf,
                       uint64_t cap, progress *pr) {
    for (uint64_t off = 0; off < t->nbytes;) {
        uint64_t n = t->nbytes - off < cap ? t->nbytes - off : cap;
        int rc = df_gguf_read(g, t, off, buf, n);
        if (rc) return rc;
        rc = df_gguf_writer_write_tensor_data(w, fd, idx, buf, n);
        if (rc) return rc;
        off += n;
        pr->done += n;
        progress_show(pr, false);
    }
    return DF_OK;
}

int df_pack_write(const char *in_path, const char *out_path, const df_pack_opts *o) {
    df_gguf *g = NULL;
    int rc = df_gguf_open(in_path, &g);
    if (rc) return rc;
    if (df_pack_is_packed(g)) { df_gguf_close(g); return df_err(DF_ERR_INVALID, "%s is already packed", in_path); }
    /* classify */
    int n_layer = 0, n_expert = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        int l, k;
        const df_gguf_tensor *t = &g->tensors[i];
        if (!parse_expert_name(t->name, &l, &k)) continue;
        if (t->n_dims != 3) { df_gguf_close(g); return df_err(DF_ERR_FORMAT, "%s: expert tensor '%s' is not 3-D", in_path, t->name); }
        if (n_expert && t->ne[2] != n_expert) {
            df_gguf_close(g);
            return df_err(DF_ERR_FORMAT, "%s: tensor '%s' has %lld experts, others %d", in_path, t->name,
                          (long long)t->ne[2], n_expert);
        }
        if (l >= 65536 || t->ne[2] <= 0 || t->ne[2] > 65536) { df_gguf_close(g); return df_err(DF_ERR_FORMAT, "%s: tensor '%s': bad layer or expert count", in_path, t->name); }
        n_expert = (int)t->ne[2];
        if (l + 1 > n_layer) n_layer = l + 1;
    }
    if (!n_expert) { df_gguf_close(g); return df_err(DF_ERR_INVALID, "%s: no routed expert tensors (blk.N.ffn_*_exps.weight)", in_path); }
    pk_tensor *lt = df_calloc((size_t)n_layer * K_N, sizeof *lt);
    uint8_t *buf = NULL, *rec = NULL;
    df_gguf_writer *w = NULL;
    char *tmp = NULL;
    int fd = -1;
    const char **names = NULL;
    uint32_t *types = NULL;
    uint64_t *nes = NULL;
    int n_names = 0;
    if (!lt) { rc = DF_ERR_NOMEM; goto out; }
    names = df_calloc((size_t)g->n_tensors, sizeof *names);
    types = df_calloc((size_t)g->n_tensors, sizeof *types);
    nes = df_calloc((size_t)g->n_tensors * 3, sizeof *nes);
    if (!names || !types || !nes) { rc = DF_ERR_NOMEM; goto out; }
    for (int i = 0; i < g->n_tensors; i++) {
        int l, k;
        const df_gguf_tensor *t = &g->tensors[i];
        if (!parse_expert_name(t->name, &l, &k)) continue;
        pk_tensor *p = &lt[l * K_N + k];
        p->present = true;
        p->type = t->type;
        for (int d = 0; d < 3; d++) p->ne[d] = t->ne[d];
        p->slice = t->nbytes / (uint64_t)n_expert;
        p->src = t;
        if (p->slice * (uint64_t)n_expert != t->nbytes) { rc = df_err(DF_ERR_FORMAT, "%s: tensor '%s': size not divisible by experts", in_path, t->name); goto out; }
        names[n_names] = t->name;
        types[n_names] = (uint32_t)t->type;
        for (int d = 0; d < 3; d++) nes[n_names * 3 + d] = (uint64_t)t->ne[d];
        n_names++;
    }
    for (int l = 0; l < n_layer; l++)
        if (lt[l * K_N + K_GATE_UP].present && (lt[l * K_N + K_GATE].present || lt[l * K_N + K_UP].present)) {
            rc = df_err(DF_ERR_FORMAT, "%s: layer %d has both fused gate_up and separate gate/up experts", in_path, l);
            goto out;
        }
    /* sizes */
    uint64_t region = 0, max_rec = 0;
    for (int l = 0; l < n_layer; l++) {
        int64_t po[DF_EXPERT_NPARTS];
        uint64_t rl = record_layout(&lt[l * K_N], po);
        if (rl > max_rec) max_rec = rl;
        uint64_t add;
        if (!df_mul_ok(df_pad(rl, REC_ALIGN), (uint64_t)n_expert, &add) || !df_add_ok(region, add, &region)) {
            rc = df_err(DF_ERR_RANGE, "%s: expert region too large", in_path);
            goto out;
        }
    }
    /* header */
    w = df_gguf_writer_new(REC_ALIGN);
    if (!w) { rc = DF_ERR_NOMEM; goto out; }
    for (int i = 0; i < g->n_kv && !rc; i++) {
        const char *k = g->kv[i].key;
        if (!strcmp(k, "general.alignment") || !strncmp(k, "split.", 6)) continue;
        rc = df_gguf_w_copy_kv(w, &g->kv[i]);
    }
    if (!rc) rc = df_gguf_w_u32(w, "deltafin.pack.version", DF_PACK_VERSION);
    if (!rc) rc = df_gguf_w_u32(w, "deltafin.pack.n_layer", (uint32_t)n_layer);
    if (!rc) rc = df_gguf_w_u32(w, "deltafin.pack.n_expert", (uint32_t)n_expert);
    if (!rc) rc = df_gguf_w_str(w, "deltafin.pack.checksum", "xxh64");
    if (!rc) rc = df_gguf_w_arr_str(w, "deltafin.pack.tensor.names", names, (uint64_t)n_names);
    if (!rc) rc = df_gguf_w_arr(w, "deltafin.pack.tensor.types", DF_GGUF_U32, types, (uint64_t)n_names);
    if (!rc) rc = df_gguf_w_arr(w, "deltafin.pack.tensor.ne", DF_GGUF_U64, nes, (uint64_t)n_names * 3);
    if (rc) goto out;
    int n_dense = 0;
    uint64_t dense_bytes = 0;
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        int l, k;
        const df_gguf_tensor *t = &g->tensors[i];
        if (parse_expert_name(t->name, &l, &k)) continue;
        rc = df_gguf_w_tensor(w, t->name, t->type, t->n_dims, t->ne, NULL);
        n_dense++;
        dense_bytes += t->nbytes;
    }
    int64_t ne_region[1] = {(int64_t)region}, ne_index[2] = {IDX_W, (int64_t)n_layer * n_expert};
    if (!rc) rc = df_gguf_w_tensor(w, "deltafin.pack.experts", DF_TYPE_I8, 1, ne_region, NULL);
    if (!rc) rc = df_gguf_w_tensor(w, "deltafin.pack.index", DF_TYPE_I64, 2, ne_index, NULL);
    if (rc) goto out;
    size_t tl = strlen(out_path) + 8;
    tmp = df_malloc(tl);
    if (!tmp) { rc = DF_ERR_NOMEM; goto out; }
    snprintf(tmp, tl, "%s.tmp", out_path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) { rc = df_err(DF_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno)); goto out; }
    rc = df_gguf_writer_write_header(w, fd);
    if (rc) goto out;
    const uint64_t cap = 64u << 20;
    buf = df_malloc(cap);
    rec = df_aligned_alloc(REC_ALIGN, df_pad(max_rec ? max_rec : 1, REC_ALIGN));
    if (!buf || !rec) { rc = DF_ERR_NOMEM; goto out; }
    progress pr = {o, dense_bytes + region, 0, df_time_ns(), 0, out_path};
    int idx = 0;
    for (int i = 0; i < g->n_tensors && !rc; i++) {
        int l, k;
        const df_gguf_tensor *t = &g->tensors[i];
        if (parse_expert_name(t->name, &l, &k)) continue;
        rc = copy_tensor(w, fd, idx++, g, t, buf, cap, &pr);
    }
    if (rc) goto out;
    int64_t *index = df_calloc((size_t)n_layer * n_expert * IDX_W, sizeof(int64_t));
    if (!index) { rc = DF_ERR_NOMEM; goto out; }
    uint64_t roff = 0, n_rec = 0;
    for (int l = 0; l < n_layer && !rc; l++) {
        int64_t po[DF_EXPERT_NPARTS];
        uint64_t rl = record_layout(&lt[l * K_N], po);
        for (int e = 0; e < n_expert && !rc; e++) {
            int64_t *row = &index[((size_t)l * n_expert + e) * IDX_W];
            row[0] = (int64_t)roff;
            row[1] = (int64_t)rl;
            for (int s = 0; s < DF_EXPERT_NPARTS; s++) row[3 + s] = po[s];
            if (!rl) continue;
            uint64_t stride = df_pad(rl, REC_ALIGN);
            memset(rec, 0, stride);
            for (int k = 0; k < K_N && !rc; k++) {
                const pk_tensor *p = &lt[l * K_N + k];
                if (!p->present) continue;
                rc = df_gguf_read(g, p->src, (uint64_t)e * p->slice, rec + po[kind_slot(k)], p->slice);
            }
            if (rc) break;
            uint64_t h = df_xxh64(rec, rl, 0);
            memcpy(&row[2], &h, 8);
            rc = df_gguf_writer_write_tensor_data(w, fd, idx, rec, stride);
            roff += stride;
            pr.done += stride;
            progress_show(&pr, false);
            if (o && o->fail_after && ++n_rec >= o->fail_after && !rc)
                rc = df_err(DF_ERR_CANCELLED, "pack interrupted after %llu records (test hook)", (unsigned long long)n_rec);
        }
    }
    if (!rc) rc = df_gguf_writer_write_tensor_data(w, fd, idx + 1, index, (uint64_t)n_layer * n_expert * IDX_W * 8);
    free(index);
    if (rc) goto out;
    progress_show(&pr, true);
    if (fsync(fd) < 0) { rc = df_err(DF_ERR_IO, "%s: fsync: %s", tmp, strerror(errno)); goto out; }
    if (close(fd) < 0) { fd = -1; rc = df_err(DF_ERR_IO, "%s: close: %s", tmp, strerror(errno)); goto out; }
    fd = -1;
    if (rename(tmp, out_path) < 0) rc = df_err(DF_ERR_IO, "%s: rename to %s: %s", tmp, out_path, strerror(errno));
out:
    if (fd >= 0) close(fd);
    if (rc && tmp) unlink(tmp);
    if (rc) df_err_prefix(rc, "pack %s", in_path);
    free(tmp);
    free(buf);
    free(rec);
    free(names);
    free(types);
    free(nes);
    free(lt);
    df_gguf_writer_free(w);
    df_gguf_close(g);
    return rc;
}

/* ---- reader -------------------------------------------------------------------------------- */

void df_pack_close(df_pack *p) {
    if (!p) return;
    for (int i = 0; i < p->n_names; i++) free(p->names[i]);
    free(p->names);
    free(p->name_layer);
    free(p->name_kind);
    free(p->t);
    free(p->index);
    free(p);
}

int df_pack_n_layers(const df_pack *p) { return p->n_layer; }
int df_pack_n_experts(const df_pack *p) { return p->n_expert; }

int df_pack_open(const df_gguf *g, df_pack **out) {
    *out = NULL;
    const char *path = g->n_shards ? g->shards[0].path : "?";
    uint32_t ver = 0, nl = 0, ne = 0;
    int rc = df_gguf_get_u32(g, "deltafin.pack.version", &ver);
    if (rc == DF_ERR_NOTFOUND) return df_err(DF_ERR_NOTFOUND, "%s: not a packed model", path);
    if (rc) return rc;
    if (ver != DF_PACK_VERSION)
        return df_err(DF_ERR_UNSUPPORTED, "%s: pack version %u (this build reads %d)", path, ver, DF_PACK_VERSION);
    if ((rc = df_gguf_get_u32(g, "deltafin.pack.n_layer", &nl)) || (rc = df_gguf_get_u32(g, "deltafin.pack.n_expert", &ne)))
        return rc == DF_ERR_NOTFOUND ? df_err(DF_ERR_FORMAT, "%s: pack: missing n_layer/n_expert", path) : rc;
    if (!nl || nl > 65536 || !ne || ne > 65536)
        return df_err(DF_ERR_FORMAT, "%s: pack: bad n_layer %u / n_expert %u", path, nl, ne);
    const char *cs = NULL;
    if (df_gguf_get_str(g, "deltafin.pack.checksum", &cs) || strcmp(cs, "xxh64"))
        return df_err(DF_ERR_FORMAT, "%s: pack: checksum must be \"xxh64\"", path);
    const void *names_v, *types_v, *ne_v;
    uint64_t nn, nt, nne;
    if ((rc = df_gguf_get_arr(g, "deltafin.pack.tensor.names", DF_GGUF_STRING, &names_v, &nn)) ||
        (rc = df_gguf_get_arr(g, "deltafin.pack.tensor.types", DF_GGUF_U32, &types_v, &nt)) ||
        (rc = df_gguf_get_arr(g, "deltafin.pack.tensor.ne", DF_GGUF_U64, &ne_v, &nne)))
        return rc == DF_ERR_NOTFOUND ? df_err(DF_ERR_FORMAT, "%s: pack: missing tensor list", path) : rc;
    if (nt != nn || nne != nn * 3 || nn > (uint64_t)nl * K_N)
        return df_err(DF_ERR_FORMAT, "%s: pack: tensor list lengths disagree", path);
    df_pack *p = df_calloc(1, sizeof *p);
    if (!p) return DF_ERR_NOMEM;
    p->n_layer = (int)nl;
    p->n_expert = (int)ne;
    p->t = df_calloc((size_t)nl * K_N, sizeof *p->t);
    p->names = df_calloc(nn ? nn : 1, sizeof *p->names);
    p->name_layer = df_calloc(nn ? nn : 1, sizeof(int));
    p->name_kind = df_calloc(nn ? nn : 1, sizeof(int));
    if (!p->t || !p->names || !p->name_layer || !p->name_kind) { df_pack_close(p); return DF_ERR_NOMEM; }
    const df_gguf_str *names = names_v;
    const uint32_t *types = types_v;
    const uint64_t *nes = ne_v;
    for (uint64_t i = 0; i < nn; i++) {
        int l, k;
        if (!parse_expert_name(names[i].data, &l, &k) || l >= (int)nl) {
            rc = df_err(DF_ERR_FORMAT, "%s: pack: bad expert tensor name '%s'", path, names[i].data);
            df_pack_close(p);
            return rc;
        }
        pk_tensor *t = &p->t[l * K_N + k];
        const df_ggml_type_info *tt = df_ggml_type((int)types[i]); /* file types only */
        if (t->present || !tt || !tt->blck || nes[i * 3 + 2] != ne || !nes[i * 3] || !nes[i * 3 + 1] ||
            nes[i * 3] > (1u << 24) || nes[i * 3 + 1] > (1u << 24) || nes[i * 3] % (uint64_t)tt->blck) {
            rc = df_err(DF_ERR_FORMAT, "%s: pack: tensor '%s': bad or duplicate type/shape", path, names[i].data);
            df_pack_close(p);
            return rc;
        }
        t->present = true;
        t->type = (int)types[i];
        for (int d = 0; d < 3; d++) t->ne[d] = (int64_t)nes[i * 3 + d];
        t->slice = (uint64_t)(t->ne[0] / tt->blck) * (uint64_t)tt->bytes * (uint64_t)t->ne[1];
        p->names[i] = df_strdup(names[i].data);
        p->name_layer[i] = l;
        p->name_kind[i] = k;
        p->n_names = (int)i + 1;
        if (!p->names[i]) { df_pack_close(p); return DF_ERR_NOMEM; }
    }
    p->region = df_gguf_tensor_find(g, "deltafin.pack.experts");
    const df_gguf_tensor *it = df_gguf_tensor_find(g, "deltafin.pack.index");
    if (!p->region || !it || p->region->type != DF_TYPE_I8 || it->type != DF_TYPE_I64 || it->ne[0] != IDX_W ||
        it->ne[1] != (int64_t)nl * ne) {
        rc = df_err(DF_ERR_FORMAT, "%s: pack: missing or malformed deltafin.pack.experts / deltafin.pack.index", path);
        df_pack_close(p);
        return rc;
    }
    if (p->region->offset % REC_ALIGN) {
        rc = df_err(DF_ERR_FORMAT, "%s: pack: expert region at offset %llu is not 4 KiB aligned", path,
                    (unsigned long long)p->region->offset);
        df_pack_close(p);
        return rc;
    }
    p->index = df_malloc(it->nbytes);
    if (!p->index) { df_pack_close(p); return DF_ERR_NOMEM; }
    rc = df_gguf_read(g, it, 0, p->index, it->nbytes);
    if (rc) { df_pack_close(p); return rc; }
    /* validate every record */
    for (int l = 0; l < (int)nl; l++) {
        int64_t po[DF_EXPERT_NPARTS];
        uint64_t rl = record_layout(&p->t[l * K_N], po);
        for (int e = 0; e < (int)ne; e++) {
            const int64_t *row = &p->index[((size_t)l * ne + e) * IDX_W];
            uint64_t end;
            bool ok = row[0] >= 0 && row[0] % REC_ALIGN == 0 && (uint64_t)row[1] == rl &&
                      df_add_ok((uint64_t)row[0], rl, &end) && end <= p->region->nbytes;
            for (int s = 0; s < DF_EXPERT_NPARTS && ok; s++) ok = row[3 + s] == po[s];
            if (!ok) {
                rc = df_err(DF_ERR_FORMAT, "%s: pack: index entry of layer %d expert %d is inconsistent "
                            "(offset %lld, length %lld, expected length %llu within %llu region bytes)",
                            path, l, e, (long long)row[0], (long long)row[1], (unsigned long long)rl,
                            (unsigned long long)p->region->nbytes);
                df_pack_close(p);
                return rc;
            }
        }
    }
    *out = p;
    return DF_OK;
}

int df_pack_expert_tensor(const df_pack *p, const char *name, int *type, int64_t ne[3]) {
    for (int i = 0; i < p->n_names; i++)
        if (!strcmp(p->names[i], name)) {
            const pk_tensor *t = &p->t[p->name_layer[i] * K_N + p->name_kind[i]];
            *type = t->type;
            for (int d = 0; d < 3; d++) ne[d] = t->ne[d];
            return DF_OK;
        }
    return DF_ERR_NOTFOUND;
}

int df_pack_locs(const df_pack *p, df_expert_loc *locs, df_expert_record *records) {
    int E = p->n_expert;
    for (int l = 0; l < p->n_layer; l++)
        for (int e = 0; e < E; e++) {
            size_t k = (size_t)l * E + e;
            const int64_t *row = &p->index[k * IDX_W];
            uint64_t base = p->region->offset + (uint64_t)row[0];
            df_expert_loc *lc = &locs[k * DF_EXPERT_NPARTS];
            memset(lc, 0, sizeof *lc * DF_EXPERT_NPARTS);
            for (int kk = 0; kk < K_N; kk++) {
                const pk_tensor *t = &p->t[l * K_N + kk];
                if (!t->present) continue;
                int s = kind_slot(kk);
                uint64_t off = base + (uint64_t)row[3 + s];
                if (kk == K_GATE_UP) {
                    uint64_t half = t->slice / 2;
                    lc[DF_EXPERT_GATE] = (df_expert_loc){p->region->shard, off, half, t->type};
                    lc[DF_EXPERT_UP] = (df_expert_loc){p->region->shard, off + half, half, t->type};
                } else {
                    lc[s] = (df_expert_loc){p->region->shard, off, t->slice, t->type};
                }
            }
            if (records) {
                records[k].file = p->region->shard;
                records[k].offset = base;
                records[k].nbytes = (uint64_t)row[1];
                memcpy(&records[k].xxh64, &row[2], 8);
            }
        }
    return DF_OK;
}

int df_pack_expert_loc(const df_pack *p, int layer, int expert, int part, df_expert_loc *out) {
    if (layer < 0 || layer >= p->n_layer || expert < 0 || expert >= p->n_expert || part < 0 || part >= DF_EXPERT_NPARTS)
        return df_err(DF_ERR_INVALID, "pack: bad layer %d / expert %d / part %d", layer, expert, part);
    const int64_t *row = &p->index[((size_t)layer * p->n_expert + expert) * IDX_W];
    uint64_t base = p->region->offset + (uint64_t)row[0];
    const pk_tensor *t = &p->t[layer * K_N];
    if (t[K_GATE_UP].present && part != DF_EXPERT_DOWN) {
        uint64_t half = t[K_GATE_UP].slice / 2;
        *out = (df_expert_loc){p->region->shard, base + (uint64_t)row[3] + (part == DF_EXPERT_UP ? half : 0), half,
                               t[K_GATE_UP].type};
        return DF_OK;
    }
    if (!t[part].present) return df_err(DF_ERR_INVALID, "pack: layer %d has no %s experts", layer, g_kind[part]);
    *out = (df_expert_loc){p->region->shard, base + (uint64_t)row[3 + part], t[part].slice, t[part].type};
    return DF_OK;
}

int df_pack_n_tensors(const df_pack *p) { return p->n_names; }

int df_pack_tensor_info(const df_pack *p, int i, const char **name, int *type, int64_t ne[3], uint64_t *nbytes) {
    if (i < 0 || i >= p->n_names) return DF_ERR_INVALID;
    const pk_tensor *t = &p->t[p->name_layer[i] * K_N + p->name_kind[i]];
    *name = p->names[i];
    *type = t->type;
    for (int d = 0; d < 3; d++) ne[d] = t->ne[d];
    *nbytes = t->slice * (uint64_t)p->n_expert;
    return DF_OK;
}

int df_pack_check(const df_gguf *g, const df_pack *p, uint64_t *n_checked) {
    uint64_t maxr = 0, n = (uint64_t)p->n_layer * p->n_expert;
    for (uint64_t k = 0; k < n; k++)
        if ((uint64_t)p->index[k * IDX_W + 1] > maxr) maxr = (uint64_t)p->index[k * IDX_W + 1];
    uint8_t *buf = df_malloc(maxr ? maxr : 1);
    if (!buf) return DF_ERR_NOMEM;
    *n_checked = 0;
    int rc = DF_OK;
    for (uint64_t k = 0; k < n && !rc; k++) {
        const int64_t *row = &p->index[k * IDX_W];
        if (!row[1]) continue;
        rc = df_gguf_read(g, p->region, (uint64_t)row[0], buf, (uint64_t)row[1]);
        if (rc) {
            rc = df_err_prefix(rc, "layer %d expert %d", (int)(k / p->n_expert), (int)(k % p->n_expert));
            break;
        }
        uint64_t want, h = df_xxh64(buf, (uint64_t)row[1], 0);
        memcpy(&want, &row[2], 8);
        if (h != want)
            rc = df_err(DF_ERR_CHECKSUM, "layer %d expert %d: checksum mismatch in %s at offset %llu (%llu bytes): expected xxh64 %016llx, got %016llx",
                        (int)(k / p->n_expert), (int)(k % p->n_expert), g->shards[p->region->shard].path,
                        (unsigned long long)(p->region->offset + (uint64_t)row[0]), (unsigned long long)row[1],
                        (unsigned long long)want, (unsigned long long)h);
        else (*n_checked)++;
    }
    free(buf);
    return rc;
}
