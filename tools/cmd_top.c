/*
 * tools/cmd_top.c — `folio top`: a terminal view of a running foliod's KV
 * pool, queues, throughput and tenants, refreshed in place (like top).
 *
 *   folio top [--socket PATH | --url http://HOST:PORT] [--interval S]
 *             [--api-key KEY] [--once] [--ascii]
 *
 * Each refresh GETs /v1/kv (JSON, parsed with cJSON) and /metrics
 * (Prometheus text, read by the tools' parser in bench_prom.c; only the
 * folio_* samples it shows) through the tools' blocking HTTP client
 * (http_client.h), on the Unix socket or TCP.
 *
 * Screen (alternate screen, cursor home, every line cleared to its end):
 *
 *   header: model, geometry, clock
 *   KV [pool bar: used | cached | free] and percentages
 *   tokens held, empty slots, shared, prefix-cache hit rate
 *   requests running / waiting / preempted, preemptions
 *   throughput (counter deltas between refreshes), TTFT / ITL percentiles
 *   block map: the rows left over, one character per run of blocks
 *     (run = ceil(blocks / cells); majority state; used runs coloured by
 *     their main tenant)
 *   tenant table
 *   footer
 *
 * Width: the terminal's (TIOCGWINSZ, re-read every frame), else $COLUMNS,
 * else 100.  The summary lines wrap at field boundaries ("  |  ") instead
 * of being cut; the pool bar and the block map take the whole width.
 *
 * Terminal: when stdin is a tty it is put in non-canonical, no-echo mode
 * (ISIG kept: ^C arrives as SIGINT); `q` quits.  SIGINT/SIGTERM set a flag
 * that ends the loop; the terminal (termios, cursor, main screen) is
 * restored on every exit path.  SIGWINCH redraws at the new size.
 * --once prints one frame to stdout without touching the terminal.
 *
 * Single-threaded; all state is local to cmd_top.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "bench_core.h"
#include "folio/buf.h"
#include "folio/common.h"
#include "folio_cmds.h"
#include "http_client.h"

/* Tenants told apart in the block map (tenant index modulo this). */
#define TOP_TENANT_SLOTS 256

/* ---- the server ------------------------------------------------------- */

struct target {
    struct bench_target bt; /* Unix socket or TCP (tools/bench_run.h) */
    const char *api_key;
};

static volatile sig_atomic_t g_stop, g_resized;

/* GET path through the tools' HTTP client: the body in *body (emptied
 * first) and the status.  0 or -errno (-ETIMEDOUT after 10 s of silence,
 * -EINTR on a stop signal, -EPROTO for a malformed response). */
static int http_get(const struct target *t, const char *path, struct folio_buf *body, int *status)
{
    const struct http_client_req r = {
        .method = "GET", .path = path, .api_key = t->api_key, .timeout_s = 10.0, .stop = &g_stop};
    body->len = 0;
    return http_client_request(&t->bt, &r, status, body, NULL, 0);
}

/* ---- Prometheus samples (tools/bench_prom.c) ---------------------------- */

#define MAX_BUCKETS 64

struct hist {
    int n;
    double le[MAX_BUCKETS], cum[MAX_BUCKETS];
};

static void prom_hist(const struct folio_buf *text, const char *name, struct hist *h)
{
    h->n = bench_prom_buckets(text->p, text->len, name, h->le, h->cum, MAX_BUCKETS);
}

/* Quantile q of the observations in cur minus old (old NULL or of another
 * shape: all of cur); linear inside a bucket.  NAN when empty. */
static double hist_quantile(double q, const struct hist *cur, const struct hist *old)
{
    bool diff = old && old->n == cur->n;
    double total = cur->n ? cur->cum[cur->n - 1] - (diff ? old->cum[cur->n - 1] : 0) : 0;
    if (!(total > 0))
        return NAN;
    double rank = q * total, prev_le = 0, prev_c = 0;
    for (int i = 0; i < cur->n; i++) {
        double c = cur->cum[i] - (diff ? old->cum[i] : 0);
        if (c >= rank) {
            if (isinf(cur->le[i]))
                return prev_le;
            double in = c - prev_c;
            return in > 0 ? prev_le + (cur->le[i] - prev_le) * (rank - prev_c) / in : cur->le[i];
        }
        prev_le = cur->le[i];
        prev_c = c;
    }
    return prev_le;
}

/* ---- screen ------------------------------------------------------------ */

/* A frame is built line by line: put() appends to `line`, endline() moves
 * it to `out`.  On a terminal (ansi) each line is cut to the width (escape
 * sequences and UTF-8 continuation bytes take no column) and lines past the
 * height are dropped; lines are joined by "\n" with none after the last,
 * so the screen never scrolls. */
struct screen {
    struct folio_buf out, line;
    int w, h, lines;
    bool ansi;  /* cursor control (a terminal) */
    bool color; /* SGR colours; without them tenants show as letters */
    bool utf8;
    bool live; /* refreshing (not --once): a key-help footer */
};

static void put(struct screen *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct screen *s, const char *fmt, ...)
{
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        folio_buf_append(&s->line, tmp, FOLIO_MIN((size_t)n, sizeof(tmp) - 1));
}

static void endline(struct screen *s)
{
    if (!s->ansi || s->lines < s->h) {
        if (s->lines > 0)
            folio_buf_append(&s->out, "\n", 1);
        int cols = 0;
        for (size_t i = 0; i < s->line.len; i++) {
            unsigned char c = (unsigned char)s->line.p[i];
            if (c == 0x1b) { /* CSI: copy through its final byte */
                size_t j = i + 1;
                if (j < s->line.len && s->line.p[j] == '[')
                    for (j++; j < s->line.len && !(s->line.p[j] >= 0x40 && s->line.p[j] <= 0x7e);)
                        j++;
                folio_buf_append(&s->out, s->line.p + i, FOLIO_MIN(j + 1, s->line.len) - i);
                i = j;
                continue;
            }
            bool cont = (c & 0xC0) == 0x80;
            if (!cont && s->ansi && cols >= s->w)
                continue;
            if (!cont)
                cols++;
            folio_buf_append(&s->out, (const char *)&c, 1);
        }
        if (s->color)
            folio_buf_append(&s->out, "\x1b[0m", 4);
        if (s->ansi)
            folio_buf_append(&s->out, "\x1b[K", 3);
    }
    s->lines++;
    s->line.len = 0;
}

/* Columns a plain UTF-8 string takes (no escape sequences in it). */
static int text_cols(const char *t)
{
    int n = 0;
    for (; *t; t++)
        n += ((unsigned char)*t & 0xC0) != 0x80;
    return n;
}

/* Fields joined by "  |  ", wrapped at field boundaries to the screen's
 * width: a continuation line starts with `indent` spaces.  Nothing is cut
 * unless one field alone is wider than the screen. */
static void put_fields(struct screen *s, int indent, const char *const *f, int n)
{
    int col = 0;
    for (int i = 0; i < n; i++) {
        int w = text_cols(f[i]);
        if (i > 0 && col + 5 + w > s->w) {
            endline(s);
            put(s, "%*s", indent, "");
            col = indent;
        } else if (i > 0) {
            put(s, "  |  ");
            col += 5;
        }
        put(s, "%s", f[i]);
        col += w;
    }
    endline(s);
}

static const char *fmt_num(char *b, size_t cap, double v)
{
    if (isnan(v))
        snprintf(b, cap, "-");
    else if (fabs(v) >= 1e9)
        snprintf(b, cap, "%.2fG", v / 1e9);
    else if (fabs(v) >= 1e6)
        snprintf(b, cap, "%.2fM", v / 1e6);
    else if (fabs(v) >= 1e4)
        snprintf(b, cap, "%.1fk", v / 1e3);
    else if (fabs(v - round(v)) < 1e-9 || fabs(v) >= 100)
        snprintf(b, cap, "%.0f", v);
    else
        snprintf(b, cap, "%.1f", v);
    return b;
}

static const char *fmt_sec(char *b, size_t cap, double s)
{
    if (isnan(s))
        snprintf(b, cap, "-");
    else if (s < 1e-3)
        snprintf(b, cap, "%.0fus", s * 1e6);
    else if (s < 1)
        snprintf(b, cap, "%.1fms", s * 1e3);
    else
        snprintf(b, cap, "%.2fs", s);
    return b;
}

static const char *fmt_bytes(char *b, size_t cap, double v)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (v >= 1024 && i < 4) {
        v /= 1024;
        i++;
    }
    snprintf(b, cap, i ? "%.1f %s" : "%.0f %s", v, u[i]);
    return b;
}

/* ANSI foreground colours for tenants (cycled). */
static const int tenant_fg[] = {34, 31, 32, 33, 35, 36, 94, 91, 92, 93, 95, 96};

static int jint(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : 0;
}

/* The compact block map (char-per-block-v2): a base64url digit's value
 * (0 for anything else), and the number of blocks in a states string (a
 * used block of tenant 64 or later is '~' and two digits). */
static int map_digit(const char *b64, char ch)
{
    const char *d = ch ? strchr(b64, ch) : NULL;
    return d ? (int)(d - b64) : 0;
}

static int map_blocks(const char *cm)
{
    int n = 0;
    for (; *cm; cm++, n++)
        if (*cm == '~')
            for (int k = 0; k < 2 && cm[1]; k++)
                cm++;
    return n;
}

static double jnum(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

struct sample {
    bool have;
    double t, prompt, gen;
    struct hist ttft, itl;
};

struct state {
    struct target tgt;
    char where[320];
    char model[128];
    int ctx_len;
    struct sample prev;
    double prompt_rate, gen_rate;
    double ttft[3], itl[3]; /* p50 p90 p99 */
    /* Latency window: percentiles count the observations since base_old,
     * 30 to 60 s ago (the newer base replaces it every 30 s); a histogram
     * with none there falls back to everything since the daemon started. */
    struct sample base_old, base_new;
    bool ttft_since_start, itl_since_start;
};

static void bar(struct screen *s, int width, const double *frac, const int *colors,
                const char *const *glyph, int n)
{
    int done = 0;
    for (int k = 0; k < n; k++) {
        int cells = (int)lround(frac[k] * width);
        if (k == n - 1 || done + cells > width)
            cells = width - done;
        if (s->color)
            put(s, "\x1b[%dm", colors[k]);
        for (int i = 0; i < cells; i++)
            put(s, "%s", glyph[k]);
        done += cells;
    }
    if (s->color)
        put(s, "\x1b[0m");
}

/* The model's name and context length, once (GET /v1/models). */
static void read_model(struct state *st)
{
    struct folio_buf mo = {0};
    int status = 0;
    if (!http_get(&st->tgt, "/v1/models", &mo, &status) && status == 200) {
        cJSON *j = cJSON_Parse(mo.p);
        cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0);
        cJSON *id = cJSON_GetObjectItem(d, "id");
        if (cJSON_IsString(id))
            snprintf(st->model, sizeof(st->model), "%s", id->valuestring);
        st->ctx_len = jint(d, "max_model_len");
        cJSON_Delete(j);
    }
    folio_free(mo.p);
}

/* Token rates against the previous sample and latency percentiles over the
 * window (struct state), from one /metrics text. */
static void update_rates(struct state *st, const struct folio_buf *mb)
{
    struct sample cur = {.have = true, .t = (double)folio_now_ns() * 1e-9};
    cur.prompt = bench_prom_sum(mb->p, mb->len, "folio_prompt_tokens_total", NULL);
    cur.gen = bench_prom_sum(mb->p, mb->len, "folio_generation_tokens_total", NULL);
    prom_hist(mb, "folio_time_to_first_token_seconds", &cur.ttft);
    prom_hist(mb, "folio_inter_token_latency_seconds", &cur.itl);
    if (st->prev.have && cur.t > st->prev.t) {
        double dt = cur.t - st->prev.t;
        st->prompt_rate = FOLIO_MAX(0, (cur.prompt - st->prev.prompt) / dt);
        st->gen_rate = FOLIO_MAX(0, (cur.gen - st->prev.gen) / dt);
    } else
        st->prompt_rate = st->gen_rate = NAN;
    static const double qs[3] = {0.5, 0.9, 0.99};
    if (!st->base_new.have)
        st->base_old = st->base_new = cur;
    else if (cur.t - st->base_new.t >= 30) {
        st->base_old = st->base_new;
        st->base_new = cur;
    }
    const struct sample *old = &st->base_old;
    st->ttft_since_start = isnan(hist_quantile(0.5, &cur.ttft, &old->ttft));
    st->itl_since_start = isnan(hist_quantile(0.5, &cur.itl, &old->itl));
    for (int k = 0; k < 3; k++) {
        st->ttft[k] = hist_quantile(qs[k], &cur.ttft, st->ttft_since_start ? NULL : &old->ttft);
        st->itl[k] = hist_quantile(qs[k], &cur.itl, st->itl_since_start ? NULL : &old->itl);
    }
    st->prev = cur;
}

/* Glyphs of the pool bar and the block map (UTF-8 or ASCII). */
struct glyphs {
    const char *full, *shade, *light, *dot;
};

/* The title line, the pool bar and the three lines of counters. */
static void draw_summary(struct screen *s, const struct state *st, const cJSON *kv,
                         const struct glyphs *g)
{
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char clock[16];
    strftime(clock, sizeof(clock), "%H:%M:%S", &tm);

    int nb = jint(kv, "num_blocks"), bs = jint(kv, "block_size");
    double bpb = jnum(kv, "bytes_per_block");
    const cJSON *blocks = cJSON_GetObjectItem(kv, "blocks");
    const cJSON *reqs = cJSON_GetObjectItem(kv, "requests");
    const cJSON *dt = cJSON_GetObjectItem(kv, "dtype");
    int used = jint(blocks, "used"), cached = jint(blocks, "cached"), nfree = jint(blocks, "free");
    double held = jnum(kv, "tokens_held"), empty = jnum(kv, "slots_empty");
    const cJSON *pc = cJSON_GetObjectItem(kv, "prefix_cache");
    double pq = jnum(pc, "queries"), ph = jnum(pc, "hits");

    put(s, "%sfolio top%s  %s  %s  %d blocks x %d tok  %s  %s/token", s->color ? "\x1b[1m" : "",
        s->color ? "\x1b[0m" : "", st->where, st->model[0] ? st->model : "?", nb, bs,
        cJSON_IsString(dt) ? dt->valuestring : "?", fmt_bytes(b1, sizeof(b1), bs ? bpb / bs : 0));
    put(s, "  %s", clock);
    endline(s);

    /* pool bar: tokens | allocated-empty | cached | free */
    double total = nb > 0 ? nb : 1;
    double filled = FOLIO_MAX(0, used - (bs ? empty / bs : 0));
    double frac[4] = {filled / total, (used - filled) / total, cached / total, nfree / total};
    int colors[4] = {34, 36, 37, 90};
    const char *glyph[4] = {g->full, g->shade, g->light, g->dot};
    int bw = FOLIO_MAX(10, s->w - 44);
    put(s, "KV [");
    bar(s, bw, frac, colors, glyph, 4);
    put(s, "] used %.1f%% cached %.1f%% free %.1f%%", 100.0 * used / total, 100.0 * cached / total,
        100.0 * nfree / total);
    endline(s);
    {
        char f0[96], f1[128], f2[64];
        snprintf(f0, sizeof(f0), "   blocks used %d  cached %d  free %d", used, cached, nfree);
        snprintf(f1, sizeof(f1), "tokens held %s  empty slots %s (%.1f%% of used slots)",
                 fmt_num(b1, sizeof(b1), held), fmt_num(b2, sizeof(b2), empty),
                 used && bs ? 100.0 * empty / ((double)used * bs) : 0.0);
        snprintf(f2, sizeof(f2), "prefix hits %s",
                 pq > 0 ? (snprintf(b3, sizeof(b3), "%.1f%%", 100 * ph / pq), b3) : "-");
        const char *f[] = {f0, f1, f2};
        put_fields(s, 3, f, 3);
    }
    {
        char f0[96], f1[48];
        snprintf(f0, sizeof(f0), "requests  running %d  waiting %d  preempted %d",
                 jint(reqs, "running"), jint(reqs, "waiting"), jint(reqs, "preempted"));
        snprintf(f1, sizeof(f1), "preemptions %d", jint(kv, "preemptions_total"));
        const char *f[] = {f0, f1};
        put_fields(s, 10, f, 2);
    }
    {
        char f0[96], f1[96], f2[96]; /* two 31-byte times and the suffix fit */
        const char *since = st->ttft_since_start && st->itl_since_start ? " (since start)"
                            : st->ttft_since_start                      ? " (TTFT since start)"
                            : st->itl_since_start                       ? " (ITL since start)"
                                                                        : "";
        snprintf(f0, sizeof(f0), "tokens/s  prompt %s  generated %s",
                 fmt_num(b1, sizeof(b1), st->prompt_rate), fmt_num(b2, sizeof(b2), st->gen_rate));
        snprintf(f1, sizeof(f1), "TTFT p50 %s p99 %s", fmt_sec(b3, sizeof(b3), st->ttft[0]),
                 fmt_sec(b4, sizeof(b4), st->ttft[2]));
        snprintf(f2, sizeof(f2), "ITL p50 %s p99 %s%s", fmt_sec(b5, sizeof(b5), st->itl[0]),
                 fmt_sec(b6, sizeof(b6), st->itl[2]), since);
        const char *f[] = {f0, f1, f2};
        put_fields(s, 10, f, 3);
    }
}

/* One cell of the map: the majority state of the blocks it covers (a used
 * cell takes the colour or letter of its commonest tenant). */
static void draw_cell(struct screen *s, const struct glyphs *g, int nu, int nc, int nf,
                      const int *tcount, bool shared, int run)
{
    if (nu >= nc && nu >= nf && nu > 0) {
        int bt = 0;
        for (int t = 1; t < TOP_TENANT_SLOTS; t++)
            if (tcount[t] > tcount[bt])
                bt = t;
        if (s->color)
            put(s, "\x1b[%dm", tenant_fg[bt % (int)FOLIO_ARRAY_LEN(tenant_fg)]);
        if (s->color)
            put(s, "%s", shared && run == 1 ? "S" : g->full);
        else
            put(s, "%c", shared && run == 1 ? '*' : 'a' + bt % 26);
    } else if (nc >= nf && nc > 0) {
        if (s->color)
            put(s, "\x1b[37m");
        put(s, "%s", g->shade);
    } else {
        if (s->color)
            put(s, "\x1b[90m");
        put(s, "%s", g->dot);
    }
}

/* The block map in map_rows lines of map_w cells: foliod's compact form
 * (one character per block: '.' free, ':' cached, a base64url digit =
 * tenant of a used block; runs of shared blocks), or the per-block objects
 * of ?map=full / older servers. */
static void draw_map(struct screen *s, const cJSON *kv, const struct glyphs *g, int map_rows,
                     int map_w)
{
    const cJSON *map = cJSON_GetObjectItem(kv, "block_map");
    const cJSON *states = cJSON_IsObject(map) ? cJSON_GetObjectItem(map, "states") : NULL;
    const char *cm = cJSON_IsString(states) ? states->valuestring : NULL;
    int n = cm ? map_blocks(cm) : cJSON_GetArraySize(map);
    const cJSON *shared_runs = cm ? cJSON_GetObjectItem(map, "shared") : NULL;
    const cJSON *sr = shared_runs ? shared_runs->child : NULL; /* runs ascending */
    int cells_avail = map_w * map_rows;
    int run = n > cells_avail ? (n + cells_avail - 1) / cells_avail : 1;
    int ncells = (n + run - 1) / run;
    put(s, "%sblock map%s  %d blocks, %s", s->color ? "\x1b[1m" : "", s->color ? "\x1b[0m" : "", n,
        run > 1 ? "" : "one character per block");
    if (run > 1)
        put(s, "one character per %d blocks (majority state)", run);
    if (s->color)
        put(s, "   %s used (colour: tenant)  %s cached  %s free  S shared", g->full, g->shade,
            g->dot);
    else
        put(s, "   a-z used (letter: tenant)  %s cached  %s free  * shared", g->shade, g->dot);
    endline(s);
    /* walk the array once (cJSON arrays are linked lists) */
    const cJSON *it = !cm && map ? map->child : NULL;
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int col = 0, bi = 0, ci = 0; /* block, and its character in cm */
    int tcount[TOP_TENANT_SLOTS];
    for (int c = 0; c < ncells; c++) {
        int nu = 0, nc = 0, nf = 0;
        bool shared = false;
        memset(tcount, 0, sizeof(tcount));
        for (int k = 0; k < run && bi < n; k++, bi++) {
            if (cm) {
                char ch = cm[ci++];
                if (ch == '.')
                    nf++;
                else if (ch == ':')
                    nc++;
                else {
                    int tn = map_digit(b64, ch);
                    if (ch == '~' && cm[ci] && cm[ci + 1]) { /* tenants from 64 on */
                        tn = 64 * map_digit(b64, cm[ci]) + map_digit(b64, cm[ci + 1]);
                        ci += 2;
                    }
                    nu++;
                    tcount[tn % TOP_TENANT_SLOTS]++;
                    /* shared runs [first, count], ascending */
                    while (sr && cJSON_GetArrayItem(sr, 0) && cJSON_GetArrayItem(sr, 1) &&
                           cJSON_GetArrayItem(sr, 0)->valueint +
                                   cJSON_GetArrayItem(sr, 1)->valueint <=
                               bi)
                        sr = sr->next;
                    if (sr && cJSON_GetArrayItem(sr, 0) &&
                        cJSON_GetArrayItem(sr, 0)->valueint <= bi)
                        shared = true;
                }
                continue;
            }
            if (!it)
                break;
            const cJSON *st_ = cJSON_GetObjectItem(it, "state");
            const char *state = cJSON_IsString(st_) ? st_->valuestring : "free";
            if (!strcmp(state, "used")) {
                nu++;
                tcount[jint(it, "tenant") % TOP_TENANT_SLOTS]++;
                shared |= jint(it, "refcount") > 1;
            } else if (!strcmp(state, "cached"))
                nc++;
            else
                nf++;
            it = it->next;
        }
        draw_cell(s, g, nu, nc, nf, tcount, shared, run);
        if (++col == map_w && c + 1 < ncells) {
            col = 0;
            endline(s);
        }
    }
    endline(s);
}

/* The tenant table: a header and up to trows rows (blocks, share of the
 * pool, requests, tokens served from the per-tenant counters). */
static void draw_tenants(struct screen *s, const cJSON *kv, const struct folio_buf *mb,
                         const struct glyphs *g, int trows)
{
    char b1[32];
    int nb = jint(kv, "num_blocks");
    double total = nb > 0 ? nb : 1;
    const cJSON *tenants = cJSON_GetObjectItem(kv, "tenants");
    int nt = cJSON_GetArraySize(tenants);
    put(s, "%s%-16s %8s %7s %8s %8s %12s%s", s->color ? "\x1b[7m" : "", "TENANT", "BLOCKS", "SHARE",
        "RUNNING", "WAITING", "TOKENS", s->color ? "\x1b[0m" : "");
    endline(s);
    int ti = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tenants)
    {
        if (ti >= trows) {
            put(s, "... %d more tenants", nt - trows);
            endline(s);
            break;
        }
        const cJSON *nm = cJSON_GetObjectItem(t, "name");
        const char *name = cJSON_IsString(nm) ? nm->valuestring : "?";
        char lab[200];
        snprintf(lab, sizeof(lab), "tenant=\"%s\"", name);
        double served = 0, v;
        if (!isnan(v = bench_prom_sum(mb->p, mb->len, "folio_tenant_prompt_tokens_total", lab)))
            served += v;
        if (!isnan(v = bench_prom_sum(mb->p, mb->len, "folio_tenant_generation_tokens_total", lab)))
            served += v;
        int tb = jint(t, "blocks_used");
        if (s->color)
            put(s, "\x1b[%dm", tenant_fg[ti % (int)FOLIO_ARRAY_LEN(tenant_fg)]);
        if (s->color)
            put(s, "%s%-15.15s", g->full, name);
        else
            put(s, "%c %-14.14s", 'a' + ti % 26, name);
        if (s->color)
            put(s, "\x1b[0m");
        put(s, " %8d %6.1f%% %8d %8d %12s", tb, 100.0 * tb / total, jint(t, "running"),
            jint(t, "waiting"), fmt_num(b1, sizeof(b1), served));
        endline(s);
        ti++;
    }
}

/* One frame into s->out.  Returns 0, or -errno when the daemon could not be
 * read (the frame then says why). */
static int frame(struct state *st, struct screen *s)
{
    struct folio_buf kvb = {0}, mb = {0};
    int status = 0, rc;
    s->lines = 0;

    if (!st->model[0])
        read_model(st);
    rc = http_get(&st->tgt, "/v1/kv", &kvb, &status);
    if (!rc && status != 200)
        rc = -EPROTO;
    if (!rc) {
        rc = http_get(&st->tgt, "/metrics", &mb, &status);
        if (!rc && status != 200)
            rc = -EPROTO;
    }
    cJSON *kv = rc ? NULL : cJSON_Parse(kvb.p);
    if (!rc && !kv)
        rc = -EPROTO;
    if (rc) {
        put(s, "folio top - %s", st->where);
        endline(s);
        put(s, "cannot read foliod: %s%s", rc == -EPROTO ? "bad response" : strerror(-rc),
            rc == -EPROTO && status && status != 200 ? " (HTTP error)" : "");
        endline(s);
    } else {
        const struct glyphs g = {
            .full = s->utf8 ? "\xe2\x96\x88" : "#",  /* █ */
            .shade = s->utf8 ? "\xe2\x96\x92" : "+", /* ▒ */
            .light = s->utf8 ? "\xe2\x96\x91" : ".", /* ░ */
            .dot = s->utf8 ? "\xc2\xb7" : ".",       /* · */
        };
        update_rates(st, &mb);
        draw_summary(s, st, kv, &g);
        /* the tenant table (header + rows) goes below the map */
        int nt = cJSON_GetArraySize(cJSON_GetObjectItem(kv, "tenants"));
        int trows = FOLIO_MIN(nt, FOLIO_MAX(1, s->h / 4));
        int map_rows =
            s->h - s->lines - 1 /* map title */ - (trows + 2) /* table */ - 1 /* footer */;
        draw_map(s, kv, &g, FOLIO_MAX(1, map_rows), FOLIO_MAX(8, s->w - 1));
        while (s->lines < s->h - (trows + 2) - 1)
            endline(s);
        draw_tenants(s, kv, &mb, &g, trows);
    }
    if (s->live && s->lines < s->h) {
        put(s, "%sq quit%s", s->color ? "\x1b[7m" : "", s->color ? "\x1b[0m" : "");
        put(s, "  %s", rc ? "retrying" : "");
        endline(s);
    }
    cJSON_Delete(kv);
    folio_free(kvb.p);
    folio_free(mb.p);
    return rc;
}

/* ---- terminal ---------------------------------------------------------- */

static struct termios g_saved;
static bool g_raw, g_alt;

static void term_restore(void)
{
    if (g_alt) {
        fputs("\x1b[0m\x1b[?25h\x1b[?1049l", stdout);
        fflush(stdout);
        g_alt = false;
    }
    if (g_raw) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved);
        g_raw = false;
    }
}

static void on_signal(int sig)
{
    if (sig == SIGWINCH)
        g_resized = 1;
    else
        g_stop = 1;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: folio top [--socket PATH | --url http://HOST:PORT] [--interval S]\n"
                 "                 [--api-key KEY] [--once] [--ascii]\n"
                 "\n"
                 "A live terminal view of a running foliod: KV pool usage, the block map,\n"
                 "queues, throughput, latency and tenants.  Press q to quit.\n"
                 "  --socket PATH  foliod's Unix socket (default $XDG_RUNTIME_DIR/foliod.sock,\n"
                 "                 else ./foliod.sock)\n"
                 "  --url URL      or its TCP listener (foliod --listen)\n"
                 "  --interval S   seconds between refreshes (default 1)\n"
                 "  --api-key KEY  sent as a bearer token (TCP with tenant keys)\n"
                 "  --once         print one frame to stdout and exit\n"
                 "  --ascii        no colours, ASCII characters only\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "folio top: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    usage(stderr);
    return 2;
}

/* --url: http://HOST:PORT (the scheme may be left out). */
static int parse_url(const char *url, struct bench_target *t)
{
    char full[600], err[200];
    snprintf(full, sizeof(full), "%s%s", strstr(url, "://") ? "" : "http://", url);
    return bench_target_url(t, full, err, sizeof(err));
}

int cmd_top(int argc, char **argv)
{
    struct state st = {0};
    const char *sock = NULL, *url = NULL;
    double interval = 1.0;
    bool once = false, ascii = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--once")) {
            once = true;
            continue;
        }
        if (!strcmp(a, "--ascii")) {
            ascii = true;
            continue;
        }
        bool takes = !strcmp(a, "--socket") || !strcmp(a, "--url") || !strcmp(a, "--interval") ||
                     !strcmp(a, "--api-key");
        if (!takes)
            return bad("unknown argument '%s'", a);
        if (i + 1 >= argc)
            return bad("%s needs a value", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--socket"))
            sock = v;
        else if (!strcmp(a, "--url"))
            url = v;
        else if (!strcmp(a, "--api-key"))
            st.tgt.api_key = v;
        else {
            char *end;
            interval = strtod(v, &end);
            if (end == v || *end || !(interval >= 0.1 && interval <= 3600))
                return bad("bad --interval '%s' (0.1..3600 seconds)", v);
        }
    }
    if (sock && url)
        return bad("--socket and --url exclude each other%s", "");
    static char def_sock[300];
    if (url) {
        if (parse_url(url, &st.tgt.bt))
            return bad("bad --url '%s' (want http://HOST:PORT)", url);
        snprintf(st.where, sizeof(st.where), "http://%s", st.tgt.bt.host);
    } else {
        if (!sock) {
            const char *rt = getenv("XDG_RUNTIME_DIR");
            snprintf(def_sock, sizeof(def_sock), "%s/foliod.sock", rt && *rt ? rt : ".");
            sock = def_sock;
        }
        char err[200];
        if (bench_target_unix(&st.tgt.bt, sock, err, sizeof(err)))
            return bad("%s", err);
        snprintf(st.where, sizeof(st.where), "%s", sock);
    }

    struct screen scr = {.w = 100, .h = 30};
    const char *columns = getenv("COLUMNS"); /* not a terminal: the shell's width, if exported */
    if (columns && atoi(columns) >= 20)
        scr.w = atoi(columns);
    const char *lang = getenv("LC_ALL");
    if (!lang || !*lang)
        lang = getenv("LC_CTYPE");
    if (!lang || !*lang)
        lang = getenv("LANG");
    scr.utf8 = !ascii && lang && (strcasestr(lang, "utf-8") || strcasestr(lang, "utf8"));
    bool tty = isatty(STDOUT_FILENO);
    scr.color = !ascii && tty && !getenv("NO_COLOR");
    scr.ansi = tty;

    if (once) {
        struct winsize ws;
        if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
            scr.w = ws.ws_col;
            scr.h = ws.ws_row;
        }
        int rc = frame(&st, &scr);
        fwrite(scr.out.p, 1, scr.out.len, stdout);
        putchar('\n');
        folio_free(scr.out.p);
        folio_free(scr.line.p);
        return rc ? 1 : 0;
    }

    struct sigaction sa = {.sa_handler = on_signal}; /* no SA_RESTART: poll wakes */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGWINCH, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    bool in_tty = isatty(STDIN_FILENO);
    if (in_tty && tcgetattr(STDIN_FILENO, &g_saved) == 0) {
        struct termios raw = g_saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        if (tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0)
            g_raw = true;
    }
    atexit(term_restore);
    if (tty) {
        fputs("\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J", stdout);
        g_alt = true;
    }
    scr.live = true;
    while (!g_stop) {
        struct winsize ws;
        if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col && ws.ws_row) {
            scr.w = ws.ws_col;
            scr.h = ws.ws_row;
        }
        scr.out.len = 0;
        g_resized = 0;
        if (tty)
            folio_buf_append(&scr.out, "\x1b[H", 3);
        frame(&st, &scr);
        if (tty)
            folio_buf_append(&scr.out, "\x1b[J", 3);
        else
            folio_buf_append(&scr.out, "\n", 1);
        if (g_stop)
            break;
        fwrite(scr.out.p, 1, scr.out.len, stdout);
        fflush(stdout);
        /* wait for the interval, a key, a resize or a stop signal */
        uint64_t deadline = folio_now_ns() + (uint64_t)(interval * 1e9);
        while (!g_stop && !g_resized) {
            int64_t left = (int64_t)(deadline - folio_now_ns()) / 1000000;
            if ((int64_t)(deadline - folio_now_ns()) <= 0)
                break;
            struct pollfd pf = {.fd = STDIN_FILENO, .events = POLLIN};
            int pr = poll(&pf, in_tty ? 1 : 0, (int)FOLIO_MAX(1, left));
            if (pr > 0) {
                char c;
                ssize_t k = read(STDIN_FILENO, &c, 1);
                if (k == 1 && (c == 'q' || c == 'Q'))
                    g_stop = 1;
                else if (k <= 0)
                    in_tty = false; /* EOF: stop polling stdin */
            }
        }
    }
    term_restore();
    folio_free(scr.out.p);
    folio_free(scr.line.p);
    return 0;
}
