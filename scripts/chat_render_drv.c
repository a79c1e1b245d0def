/* chat_render_drv.c — tiny driver for scripts/chat_crosscheck.py: renders one template with the C
 * engine.  Usage: drv TEMPLATE MESSAGES.json TOOLS.json|- AGP(0/1) EXTRA.json|- BOS|- EOS|-
 * Prints the render on stdout (exit 0) or the error on stderr (exit 1). */
#include "text/chat.h"
#include "base/util.h"
/* drv template msgs.json tools.json|- agp(0/1) extra.json|- bos|- eos|- */
static char *rd(const char *p) { if (!strcmp(p, "-")) return NULL; char *d; size_t n; if (df_read_file(p, &d, &n)) return NULL; return d; }
int main(int argc, char **argv) {
    if (argc < 8) return 2;
    char *t = rd(argv[1]), *m = rd(argv[2]), *tools = rd(argv[3]), *ex = rd(argv[5]);
    df_chat_opts o = {0};
    o.add_generation_prompt = atoi(argv[4]);
    o.tools_json = tools; o.extra_vars_json = ex;
    o.bos_token = strcmp(argv[6], "-") ? argv[6] : NULL;
    o.eos_token = strcmp(argv[7], "-") ? argv[7] : NULL;
    o.now = 1768478400;
    char *out = NULL;
    int rc = df_chat_render_ex(t ? t : "", m, &o, &out);
    if (rc) { fprintf(stderr, "%s\n", df_errmsg()); free(t); free(m); free(tools); free(ex); return 1; }
    fwrite(out, 1, strlen(out), stdout);
    free(out); free(t); free(m); free(tools); free(ex);
    return 0;
}
