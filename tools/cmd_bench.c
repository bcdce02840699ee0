/*
 * tools/cmd_bench.c — `folio bench`: a load tester for foliod and any
 * OpenAI-compatible streaming server, reporting as `vllm bench serve`
 * does.
 *
 * Phases: parse options → probe the server (GET /v1/models: model id,
 * vocab_size, max_model_len) → build every request up front (lengths,
 * prompts, arrival times, tenant, JSON body; deterministic for --seed) →
 * run them on one libuv loop (bench_run.c) → reduce the per-request
 * records to the report, the JSON file and the SVG plot.  Behind a load
 * balancer: requests per replica (X-Folio-Replica) and, with
 * --replica-metrics, each replica's /metrics before and after the run for
 * the cluster's prefix-cache hit rate (bench_cluster.c).
 *
 * Memory: the request array and its bodies live for the whole command;
 * per-request chunk arrays are sized for the expected output before the
 * request is sent.  The reduction, the report and its metric definitions
 * are in tools/bench_report.c.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench_core.h"
#include "sim_trace.h"
#include "bench_run.h"
#include "bench_cluster.h"
#include "folio/buf.h"
#include "folio/common.h"
#include "http_client.h"
#include "folio_cmds.h"
#include "bench_opts.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: folio bench [--socket PATH ... | --url http://HOST:PORT] [options]\n"
            "Drives an OpenAI-compatible streaming server (foliod or another) and reports\n"
            "throughput and latency like `vllm bench serve`.\n"
            "target:\n"
            "  --socket PATH           Unix socket; repeat to spread tenants over sockets\n"
            "                          (default $XDG_RUNTIME_DIR/foliod.sock, else ./foliod.sock)\n"
            "  --url URL               http://HOST:PORT[/prefix] over TCP instead\n"
            "  --endpoint PATH         /v1/completions (default), /v1/chat/completions,\n"
            "                          /v1/responses (OpenAI's Responses), /v1/messages\n"
            "                          (Anthropic's), or /v1/embeddings (one input a request;\n"
            "                          TTFT is the answer's latency; --output-len and\n"
            "                          sampling ignored)\n"
            "  --model NAME            model field (default: the first of GET /v1/models)\n"
            "  --lora-modules A,B,...  each request names one of these (LoRA adapters the\n"
            "                          server loaded) as its model, at random (vLLM's option;\n"
            "                          the same prompts as without it)\n"
            "  --tenants K1,K2,...     API keys, sent as 'Authorization: Bearer K'; request i\n"
            "                          goes to tenant i mod K (trace: tenant id mod K)\n"
            "workload:\n"
            "  --dataset random|prefix|trace          (default random)\n"
            "  --input-len L           prompt tokens (default 128)\n"
            "  --output-len O          max_tokens (default 128)\n"
            "  --range-ratio R         lengths uniform in [L(1-R), L(1+R)] (default 0)\n"
            "  --text-prompts          random words instead of token-id prompts (one word is\n"
            "                          about one token; chat endpoints always use text)\n"
            "  --prefix-len P          prefix: every prompt starts with the same P tokens,\n"
            "                          then L random ones (default 128); trace: the length\n"
            "                          of shared prefix k\n"
            "  --trace FILE            one request per line: 'arrival_s tenant prompt_len\n"
            "                          output_len prefix_id' ('#' comments; prefix_id -1 =\n"
            "                          none, k >= 0 = starts with shared prefix k: its first\n"
            "                          min(P, prompt_len - 1) tokens) — `folio sim`'s format;\n"
            "                          arrivals come from the file\n"
            "  --vocab-size N          token ids are drawn from [1, N) (default: the server's\n"
            "                          vocab_size from /v1/models, else 1000)\n"
            "  --seed N                workload seed (default 0); also sent as 'seed'\n"
            "  --ignore-eos            send ignore_eos: true\n"
            "  --temperature T         send temperature\n"
            "  --top-p P               send top_p (0 < P <= 1)\n"
            "  --top-k K               send top_k (K >= 1)\n"
            "  --logit-bias TOK:BIAS,...   send logit_bias\n"
            "arrivals and bounds:\n"
            "  --num-prompts N         requests (default 100)\n"
            "  --request-rate R        requests/s, or inf (default inf: all at once)\n"
            "  --burstiness B          gamma inter-arrival shape (1 = Poisson; default 1)\n"
            "  --max-concurrency C     at most C requests in flight (closed loop)\n"
            "  --duration S            send nothing after S seconds (in-flight ones finish)\n"
            "  --timeout S             per-request timeout (default 300)\n"
            "output:\n"
            "  --slo ttft=MS,tpot=MS,e2el=MS   goodput: requests meeting every given bound\n"
            "  --json FILE             everything, with per-request records\n"
            "  --scrape-metrics        sample GET /metrics of the first target once a second\n"
            "                          (KV usage, running / waiting requests, preemptions)\n"
            "  --plot FILE.svg         throughput, KV usage and queue depth over time\n"
            "  --replica-metrics URL,...   replicas behind a balancer (http://HOST:PORT each):\n"
            "                          /metrics scraped before and after the run for the\n"
            "                          cluster's prefix-cache hit rate (requests per replica\n"
            "                          are always counted from the X-Folio-Replica header)\n"
            "  --metrics-key KEY       key for those scrapes (foliod: the operator key)\n"
            "  --progress | --no-progress   bar on stderr (default: when it is a terminal)\n");
}

/* ---- option parsing ---------------------------------------------------- */

static int parse_num(const char *s, double lo, double hi, double *out)
{
    char *e;
    if (!strcmp(s, "inf")) {
        *out = INFINITY;
        return hi == INFINITY ? 0 : -EINVAL;
    }
    errno = 0;
    double v = strtod(s, &e);
    if (e == s || *e || errno || !(v >= lo && v <= hi))
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_int(const char *s, long long lo, long long hi, long long *out)
{
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (e == s || *e || errno || v < lo || v > hi)
        return -EINVAL;
    *out = v;
    return 0;
}

static int parse_slo(struct opts *o, const char *spec)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        double v;
        if (!eq || parse_num(eq + 1, 0, 1e12, &v))
            return -EINVAL;
        *eq = 0;
        if (!strcmp(tok, "ttft"))
            o->slo_ttft = v;
        else if (!strcmp(tok, "tpot"))
            o->slo_tpot = v;
        else if (!strcmp(tok, "e2el") || !strcmp(tok, "e2e"))
            o->slo_e2el = v;
        else
            return -EINVAL;
    }
    return 0;
}

static int parse_bias(struct opts *o, const char *spec)
{
    char buf[2048];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        long long id;
        double v;
        if (!colon || o->n_bias == MAX_BIAS)
            return -EINVAL;
        *colon = 0;
        if (parse_int(tok, 0, INT32_MAX, &id) || parse_num(colon + 1, -100, 100, &v))
            return -EINVAL;
        o->bias_tok[o->n_bias] = (int32_t)id;
        o->bias_val[o->n_bias++] = v;
    }
    return 0;
}

static int parse_keys(struct opts *o, const char *spec)
{
    const char *p = spec;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n == 0 || n > 200 || o->n_keys == MAX_KEYS)
            return -EINVAL;
        o->keys[o->n_keys] = folio_malloc(n + 1);
        if (!o->keys[o->n_keys])
            return -ENOMEM;
        memcpy(o->keys[o->n_keys], p, n);
        o->keys[o->n_keys++][n] = 0;
        p += n + (c ? 1 : 0);
        if (c && !*p)
            return -EINVAL;
    }
    return o->n_keys ? 0 : -EINVAL;
}

/* spec's comma-separated words, in a copy *buf owns (freed first), into
 * out[cap]: how many (>= 1), or -EINVAL (none, or more than cap), -ENOMEM. */
static int split_commas(char **buf, const char *spec, const char **out, int cap)
{
    folio_free(*buf);
    if (!(*buf = folio_malloc(strlen(spec) + 1)))
        return -ENOMEM;
    memcpy(*buf, spec, strlen(spec) + 1);
    int n = 0;
    for (char *save = NULL, *tok = strtok_r(*buf, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (n == cap)
            return -EINVAL;
        out[n++] = tok;
    }
    return n ? n : -EINVAL;
}

static int parse_loras(struct opts *o, const char *spec)
{
    int n = split_commas(&o->lora_spec, spec, o->loras, (int)FOLIO_ARRAY_LEN(o->loras));
    o->n_loras = n > 0 ? n : 0;
    return n > 0 ? 0 : n;
}

static int parse_replicas(struct opts *o, const char *spec)
{
    const char *urls[BENCH_MAX_REPLICAS];
    int n = split_commas(&o->replica_spec, spec, urls, BENCH_MAX_REPLICAS);
    o->n_replicas = 0;
    for (int i = 0; i < n; i++) {
        if (strncmp(urls[i], "http://", 7))
            return -EINVAL;
        memset(&o->replicas[o->n_replicas], 0, sizeof(o->replicas[0]));
        o->replicas[o->n_replicas++].url = urls[i];
    }
    return n > 0 ? 0 : n;
}

/* ---- workload ------------------------------------------------------------ */

static const char *const words[] = {
    "the",   "of",    "and",    "to",    "in",    "is",    "that",  "for",    "it",     "as",
    "was",   "with",  "be",     "by",    "on",    "not",   "he",    "this",   "are",    "or",
    "his",   "from",  "at",     "which", "but",   "have",  "an",    "had",    "they",   "you",
    "were",  "their", "one",    "all",   "we",    "can",   "her",   "has",    "there",  "been",
    "if",    "more",  "when",   "will",  "would", "who",   "so",    "no",     "time",   "page",
    "block", "table", "memory", "cache", "model", "token", "query", "server", "daemon", "queue",
    "batch", "step",  "prefix", "river"};

struct workload {
    int32_t vocab;
    uint64_t seed;
};

/* Token i of shared prefix k (deterministic in seed, k, i). */
static int32_t prefix_token(const struct workload *w, int64_t k, int32_t i)
{
    struct bench_rng r;
    bench_rng_seed(&r, w->seed * 0x9e3779b97f4a7c15ull + (uint64_t)k * 1000003ull + (uint64_t)i);
    return (int32_t)bench_rng_range(&r, 1, w->vocab - 1);
}

static void prompt_json(struct folio_buf *b, struct workload *w, struct bench_rng *rng, int32_t len,
                        int64_t prefix_id, int32_t shared, bool text)
{
    if (text) {
        struct folio_buf t = {0};
        for (int32_t i = 0; i < len; i++) {
            int64_t wi = i < shared
                             ? prefix_token(w, prefix_id, i) % (int32_t)FOLIO_ARRAY_LEN(words)
                             : bench_rng_range(rng, 0, FOLIO_ARRAY_LEN(words) - 1);
            if (i)
                folio_buf_append(&t, " ", 1);
            folio_buf_append(&t, words[wi], strlen(words[wi]));
        }
        if (t.oom || !t.p) {
            b->oom = b->oom || t.oom;
            folio_buf_append(b, "\"\"", 2);
        } else
            folio_buf_json_str(b, t.p, strlen(t.p));
        folio_free(t.p);
        return;
    }
    folio_buf_append(b, "[", 1);
    for (int32_t i = 0; i < len; i++) {
        int32_t id = i < shared ? prefix_token(w, prefix_id, i)
                                : (int32_t)bench_rng_range(rng, 1, w->vocab - 1);
        folio_buf_printf(b, i ? ",%d" : "%d", id);
    }
    folio_buf_append(b, "]", 1);
}

static int build_body(const struct opts *o, struct workload *w, struct bench_rng *rng,
                      const char *model, bool chat, struct bench_req *r, int64_t prefix_id,
                      int32_t shared)
{
    struct folio_buf b = {0};
    bool text = o->text_prompts || chat;
    bool embed = strstr(o->endpoint, "embeddings") != NULL;
    bool responses = !strcmp(o->endpoint, "/v1/responses");
    bool messages = !strcmp(o->endpoint, "/v1/messages");
    folio_buf_append(&b, "{", 1);
    if (model) {
        folio_buf_append(&b, "\"model\":", 8);
        folio_buf_json_str(&b, model, strlen(model));
        folio_buf_append(&b, ",", 1);
    }
    if (embed) { /* the input alone: nothing is generated or sampled */
        folio_buf_printf(&b, "\"input\":");
        prompt_json(&b, w, rng, r->prompt_len, prefix_id, shared, text);
        folio_buf_append(&b, "}", 1);
        goto done;
    }
    if (responses) {
        folio_buf_printf(&b, "\"input\":[{\"role\":\"user\",\"content\":");
        prompt_json(&b, w, rng, r->prompt_len, prefix_id, shared, true);
        folio_buf_printf(&b, "}],\"max_output_tokens\":%d,\"stream\":true,\"store\":false",
                         r->output_len);
    } else if (chat) {
        folio_buf_printf(&b, "\"messages\":[{\"role\":\"user\",\"content\":");
        prompt_json(&b, w, rng, r->prompt_len, prefix_id, shared, true);
        folio_buf_append(&b, "}]", 2);
    } else {
        folio_buf_printf(&b, "\"prompt\":");
        prompt_json(&b, w, rng, r->prompt_len, prefix_id, shared, text);
    }
    if (messages) /* usage comes in its message_start and message_delta events */
        folio_buf_printf(&b, ",\"max_tokens\":%d,\"stream\":true", r->output_len);
    else if (!responses)
        folio_buf_printf(
            &b, ",\"max_tokens\":%d,\"stream\":true,\"stream_options\":{\"include_usage\":true}",
            r->output_len);
    if (o->ignore_eos)
        folio_buf_printf(&b, ",\"ignore_eos\":true");
    if (o->temperature_set)
        folio_buf_printf(&b, ",\"temperature\":%.17g", o->temperature);
    if (o->top_p_set)
        folio_buf_printf(&b, ",\"top_p\":%.17g", o->top_p);
    if (o->top_k > 0)
        folio_buf_printf(&b, ",\"top_k\":%d", (int)o->top_k);
    if (o->seed_set)
        folio_buf_printf(&b, ",\"seed\":%llu", (unsigned long long)(o->seed & ((1ull << 53) - 1)));
    if (o->n_bias) {
        folio_buf_printf(&b, ",\"logit_bias\":{");
        for (int i = 0; i < o->n_bias; i++)
            folio_buf_printf(&b, "%s\"%d\":%.17g", i ? "," : "", o->bias_tok[i], o->bias_val[i]);
        folio_buf_append(&b, "}", 1);
    }
    folio_buf_append(&b, "}", 1);
done:
    if (b.oom) {
        folio_free(b.p);
        return -ENOMEM;
    }
    r->body = b.p;
    r->body_len = b.len;
    return 0;
}

static int32_t sample_len(struct bench_rng *rng, int32_t l, double ratio)
{
    if (ratio <= 0)
        return l;
    int64_t lo = (int64_t)floor(l * (1 - ratio)), hi = (int64_t)ceil(l * (1 + ratio));
    if (lo < 1)
        lo = 1;
    if (hi < lo)
        hi = lo;
    return (int32_t)bench_rng_range(rng, lo, hi);
}

static int build_requests(const struct opts *o, const char *model, struct bench_req **out,
                          int32_t *n_out, int n_tenants, char *err, size_t errlen)
{
    bool chat = strstr(o->endpoint, "chat") != NULL || !strcmp(o->endpoint, "/v1/responses") ||
                !strcmp(o->endpoint, "/v1/messages");
    struct workload w = {.vocab = o->vocab, .seed = o->seed};
    struct bench_rng rng, arr, pick;
    bench_rng_seed(&rng, o->seed);
    bench_rng_seed(&arr, o->seed ^ 0xa5a5a5a5deadbeefull);
    bench_rng_seed(&pick, o->seed ^ 0x10a4a10a4a10a4a1ull); /* its own stream */
    struct sim_trace tr = {0};
    int32_t n = o->num_prompts;
    if (o->dataset == DS_TRACE) {
        int rc = sim_trace_load(o->trace, &tr, err, errlen);
        if (rc)
            return rc;
        if (tr.n < n || !o->num_prompts)
            n = tr.n;
    }
    struct bench_req *reqs = folio_calloc(n ? (size_t)n : 1, sizeof(*reqs));
    if (!reqs) {
        sim_trace_free(&tr);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    double t = 0;
    for (int32_t i = 0; i < n; i++) {
        struct bench_req *r = &reqs[i];
        r->idx = i;
        int64_t prefix_id = -1;
        int32_t shared = 0;
        if (o->dataset == DS_TRACE) {
            const struct sim_trace_req *q = &tr.reqs[i];
            r->arrival_s = q->arrival_s;
            r->tenant_id = q->tenant;
            r->tenant = (int)(q->tenant % (uint32_t)n_tenants);
            r->prompt_len = q->prompt_len;
            r->output_len = q->output_len;
            if (q->prefix_id >= 0) {
                prefix_id = q->prefix_id;
                shared = FOLIO_MIN(o->prefix_len, q->prompt_len - 1);
            }
        } else {
            if (i > 0)
                t += bench_arrival_gap(&arr, o->rate, o->burstiness);
            r->arrival_s = t;
            r->tenant = i % n_tenants;
            r->tenant_id = (uint32_t)r->tenant;
            r->prompt_len = sample_len(&rng, o->input_len, o->range_ratio);
            r->output_len = sample_len(&rng, o->output_len, o->range_ratio);
            if (o->dataset == DS_PREFIX) {
                prefix_id = 0;
                shared = o->prefix_len;
                r->prompt_len += o->prefix_len;
            }
        }
        const char *m = o->n_loras ? o->loras[bench_rng_u64(&pick) % (uint64_t)o->n_loras] : model;
        if (build_body(o, &w, &rng, m, chat, r, prefix_id, shared)) {
            for (int32_t k = 0; k < i; k++)
                bench_req_free(&reqs[k]);
            folio_free(reqs);
            sim_trace_free(&tr);
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
    }
    sim_trace_free(&tr);
    *out = reqs;
    *n_out = n;
    return 0;
}

/* ---- main ---------------------------------------------------------------- */

static void probe_models(const struct bench_target *t, const char *key, const char **model,
                         char *model_buf, size_t cap, int32_t *vocab, int32_t *ctx)
{
    struct folio_buf body = {0};
    char err[200];
    int status = 0;
    if (http_client_get(t, "/v1/models", key, &status, &body, err, sizeof(err)) || status != 200) {
        folio_buf_free(&body);
        return;
    }
    cJSON *j = cJSON_ParseWithLength(body.p, body.len);
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *m0 = cJSON_IsArray(data) ? cJSON_GetArrayItem(data, 0) : NULL;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m0, "id");
    const cJSON *vs = cJSON_GetObjectItemCaseSensitive(m0, "vocab_size");
    const cJSON *ml = cJSON_GetObjectItemCaseSensitive(m0, "max_model_len");
    if (!*model && cJSON_IsString(id)) {
        snprintf(model_buf, cap, "%s", id->valuestring);
        *model = model_buf;
    }
    if (cJSON_IsNumber(vs) && vs->valuedouble >= 2 && vs->valuedouble < 1e9)
        *vocab = (int32_t)vs->valuedouble;
    if (cJSON_IsNumber(ml) && ml->valuedouble >= 1 && ml->valuedouble < 1e9)
        *ctx = (int32_t)ml->valuedouble;
    cJSON_Delete(j);
    folio_buf_free(&body);
}

/* Fills *o from argv: -1 to go on, else the exit status (0 after --help,
 * 2 after a message on stderr). */
enum opt_id {
    O_SOCKET = 256,
    O_URL,
    O_ENDPOINT,
    O_MODEL,
    O_DATASET,
    O_INPUT,
    O_OUTPUT,
    O_RANGE,
    O_TEXT,
    O_PREFIX,
    O_TRACE,
    O_EOS,
    O_TEMP,
    O_TOP_P,
    O_TOP_K,
    O_SEED,
    O_BIAS,
    O_TENANTS,
    O_RATE,
    O_BURST,
    O_CONC,
    O_NUM,
    O_DUR,
    O_TIMEOUT,
    O_SLO,
    O_JSON,
    O_PLOT,
    O_SCRAPE,
    O_VOCAB,
    O_PROG,
    O_NOPROG,
    O_REPLICAS,
    O_LORAS,
    O_METRICS_KEY,
    O_HELP
};

/* Applies one option to *o: NULL, or what its value should have been. */
static const char *apply_opt(struct opts *o, enum opt_id id, const char *arg)
{
    double d;
    long long v;
    switch (id) {
    case O_SOCKET:
        if (o->n_sockets == MAX_TARGETS)
            return "--socket: too many";
        else
            o->sockets[o->n_sockets++] = arg;
        break;
    case O_URL:
        o->url = arg;
        break;
    case O_ENDPOINT:
        if (strcmp(arg, "/v1/completions") && strcmp(arg, "/v1/chat/completions") &&
            strcmp(arg, "/v1/embeddings") && strcmp(arg, "/v1/responses") &&
            strcmp(arg, "/v1/messages"))
            return "--endpoint: /v1/completions, /v1/chat/completions, /v1/responses, "
                   "/v1/messages or /v1/embeddings";
        o->endpoint = arg;
        break;
    case O_MODEL:
        o->model = arg;
        break;
    case O_DATASET:
        if (!strcmp(arg, "random"))
            o->dataset = DS_RANDOM;
        else if (!strcmp(arg, "prefix"))
            o->dataset = DS_PREFIX;
        else if (!strcmp(arg, "trace"))
            o->dataset = DS_TRACE;
        else
            return "--dataset: random, prefix or trace";
        break;
    case O_INPUT:
    case O_OUTPUT:
    case O_PREFIX:
        if (parse_int(arg, id == O_PREFIX ? 0 : 1, 1 << 24, &v))
            return "length: an integer in [1, 16M]";
        else if (id == O_INPUT)
            o->input_len = (int32_t)v;
        else if (id == O_OUTPUT)
            o->output_len = (int32_t)v;
        else {
            o->prefix_len = (int32_t)v;
            o->prefix_len_set = true;
        }
        break;
    case O_RANGE:
        if (parse_num(arg, 0, 1, &o->range_ratio))
            return "--range-ratio: a number in [0, 1]";
        break;
    case O_TEXT:
        o->text_prompts = true;
        break;
    case O_TRACE:
        o->trace = arg;
        break;
    case O_EOS:
        o->ignore_eos = true;
        break;
    case O_TEMP:
        if (parse_num(arg, 0, 100, &o->temperature))
            return "--temperature: a number >= 0";
        o->temperature_set = true;
        break;
    case O_TOP_P:
        if (parse_num(arg, 0, 1, &o->top_p) || !(o->top_p > 0))
            return "--top-p: a number in (0, 1]";
        o->top_p_set = true;
        break;
    case O_TOP_K:
        if (parse_int(arg, 1, INT32_MAX, &v))
            return "--top-k: an integer >= 1";
        o->top_k = (int32_t)v;
        break;
    case O_SEED:
        if (parse_int(arg, 0, LLONG_MAX, &v))
            return "--seed: an integer >= 0";
        o->seed = (uint64_t)v;
        o->seed_set = true;
        break;
    case O_BIAS:
        if (parse_bias(o, arg))
            return "--logit-bias: TOK:BIAS,... (bias in [-100, 100])";
        break;
    case O_TENANTS:
        if (parse_keys(o, arg))
            return "--tenants: K1,K2,... (non-empty keys)";
        break;
    case O_RATE:
        if (parse_num(arg, 1e-9, INFINITY, &o->rate))
            return "--request-rate: a number > 0 or inf";
        break;
    case O_BURST:
        if (parse_num(arg, 1e-3, 1e6, &o->burstiness))
            return "--burstiness: a number > 0";
        break;
    case O_CONC:
        if (parse_int(arg, 1, 1 << 20, &v))
            return "--max-concurrency: an integer >= 1";
        o->max_concurrency = (int)v;
        break;
    case O_NUM:
        if (parse_int(arg, 1, 1 << 24, &v))
            return "--num-prompts: an integer >= 1";
        o->num_prompts = (int32_t)v;
        break;
    case O_DUR:
        if (parse_num(arg, 1e-3, 1e9, &d))
            return "--duration: seconds > 0";
        o->duration = d;
        break;
    case O_TIMEOUT:
        if (parse_num(arg, 1e-3, 1e7, &d))
            return "--timeout: seconds > 0";
        o->timeout = d;
        break;
    case O_SLO:
        if (parse_slo(o, arg))
            return "--slo: ttft=MS,tpot=MS,e2el=MS";
        break;
    case O_JSON:
        o->json = arg;
        break;
    case O_PLOT:
        o->plot = arg;
        break;
    case O_SCRAPE:
        o->scrape = true;
        break;
    case O_VOCAB:
        if (parse_int(arg, 2, INT32_MAX, &v))
            return "--vocab-size: an integer >= 2";
        o->vocab = (int32_t)v;
        break;
    case O_PROG:
        o->progress = 1;
        break;
    case O_NOPROG:
        o->progress = 0;
        break;
    case O_LORAS:
        if (parse_loras(o, arg))
            return "--lora-modules: NAME,... (at most 16)";
        break;
    case O_REPLICAS:
        if (parse_replicas(o, arg))
            return "--replica-metrics: http://HOST:PORT,... (at most 64)";
        break;
    case O_METRICS_KEY:
        o->metrics_key = arg;
        break;
    case O_HELP:
        break;
    }
    return NULL;
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){
        .endpoint = "/v1/completions",
        .dataset = DS_RANDOM,
        .input_len = 128,
        .output_len = 128,
        .prefix_len = 128,
        .rate = INFINITY,
        .burstiness = 1,
        .num_prompts = 100,
        .timeout = 300,
        .slo_ttft = NAN,
        .slo_tpot = NAN,
        .slo_e2el = NAN,
        .progress = -1,
    };
    static const struct option lo[] = {
        {"socket", required_argument, 0, O_SOCKET},
        {"url", required_argument, 0, O_URL},
        {"base-url", required_argument, 0, O_URL},
        {"endpoint", required_argument, 0, O_ENDPOINT},
        {"model", required_argument, 0, O_MODEL},
        {"dataset", required_argument, 0, O_DATASET},
        {"input-len", required_argument, 0, O_INPUT},
        {"output-len", required_argument, 0, O_OUTPUT},
        {"range-ratio", required_argument, 0, O_RANGE},
        {"text-prompts", no_argument, 0, O_TEXT},
        {"prefix-len", required_argument, 0, O_PREFIX},
        {"trace", required_argument, 0, O_TRACE},
        {"ignore-eos", no_argument, 0, O_EOS},
        {"temperature", required_argument, 0, O_TEMP},
        {"top-p", required_argument, 0, O_TOP_P},
        {"top-k", required_argument, 0, O_TOP_K},
        {"seed", required_argument, 0, O_SEED},
        {"logit-bias", required_argument, 0, O_BIAS},
        {"tenants", required_argument, 0, O_TENANTS},
        {"request-rate", required_argument, 0, O_RATE},
        {"burstiness", required_argument, 0, O_BURST},
        {"max-concurrency", required_argument, 0, O_CONC},
        {"concurrency", required_argument, 0, O_CONC},
        {"num-prompts", required_argument, 0, O_NUM},
        {"duration", required_argument, 0, O_DUR},
        {"timeout", required_argument, 0, O_TIMEOUT},
        {"slo", required_argument, 0, O_SLO},
        {"json", required_argument, 0, O_JSON},
        {"plot", required_argument, 0, O_PLOT},
        {"scrape-metrics", no_argument, 0, O_SCRAPE},
        {"vocab-size", required_argument, 0, O_VOCAB},
        {"progress", no_argument, 0, O_PROG},
        {"no-progress", no_argument, 0, O_NOPROG},
        {"replica-metrics", required_argument, 0, O_REPLICAS},
        {"lora-modules", required_argument, 0, O_LORAS},
        {"metrics-key", required_argument, 0, O_METRICS_KEY},
        {"help", no_argument, 0, O_HELP},
        {0, 0, 0, 0},
    };
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (c == O_HELP || c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c < O_SOCKET || c > O_METRICS_KEY) {
            fprintf(stderr, "folio bench: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
        const char *bad = apply_opt(o, (enum opt_id)c, optarg);
        if (bad) {
            fprintf(stderr, "folio bench: %s (got '%s')\n", bad, optarg ? optarg : "");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "folio bench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o->url && o->n_sockets) {
        fprintf(stderr, "folio bench: --socket and --url exclude each other\n");
        return 2;
    }
    if ((o->dataset == DS_TRACE) != (o->trace != NULL)) {
        fprintf(stderr, "folio bench: --dataset trace and --trace FILE go together\n");
        return 2;
    }
    return -1;
}

/* Resolves --url or the sockets (default: $XDG_RUNTIME_DIR/foliod.sock,
 * else ./foliod.sock) into targets[]; 0, or -EINVAL after a message. */
static int open_targets(const struct opts *o, struct bench_target *targets, int *n_targets,
                        char *desc, size_t desc_len)
{
    char err[512], def_sock[200];
    *n_targets = 0;
    if (o->url) {
        if (bench_target_url(&targets[0], o->url, err, sizeof(err))) {
            fprintf(stderr, "folio bench: %s\n", err);
            return -EINVAL;
        }
        *n_targets = 1;
        snprintf(desc, desc_len, "%s", o->url);
        return 0;
    }
    const char *const *sockets = o->sockets;
    const char *one[1];
    int n_sockets = o->n_sockets;
    if (!n_sockets) {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (xdg && *xdg)
            snprintf(def_sock, sizeof(def_sock), "%s/foliod.sock", xdg);
        else
            snprintf(def_sock, sizeof(def_sock), "./foliod.sock");
        one[0] = def_sock;
        sockets = one;
        n_sockets = 1;
    }
    for (int i = 0; i < n_sockets; i++)
        if (bench_target_unix(&targets[(*n_targets)++], sockets[i], err, sizeof(err))) {
            fprintf(stderr, "folio bench: %s\n", err);
            return -EINVAL;
        }
    snprintf(desc, desc_len, "unix:%s%s", sockets[0], n_sockets > 1 ? " (+more)" : "");
    return 0;
}

/* Probes the first target, builds every request, runs them: the exit
 * status. */
static int run(struct opts *o, struct bench_target *targets, int n_targets, const char *target_desc)
{
    char err[512], model_buf[256];
    const char *model = o->model;
    int32_t vocab = 0, ctx = 0;
    probe_models(&targets[0], o->n_keys ? o->keys[0] : NULL, &model, model_buf, sizeof(model_buf),
                 &vocab, &ctx);
    o->vocab = o->vocab ? o->vocab : vocab ? vocab : 1000;
    if (ctx && o->dataset != DS_TRACE &&
        (int64_t)o->input_len * (1 + o->range_ratio) +
                (o->dataset == DS_PREFIX ? o->prefix_len : 0) +
                o->output_len * (1 + o->range_ratio) >
            ctx)
        fprintf(stderr, "folio bench: warning: prompt + output may exceed max_model_len %d\n", ctx);

    struct bench_req *reqs = NULL;
    int32_t n = 0;
    int n_tenants = FOLIO_MAX(FOLIO_MAX(o->n_keys, n_targets), 1);
    if (build_requests(o, model, &reqs, &n, n_tenants, err, sizeof(err))) {
        fprintf(stderr, "folio bench: %s\n", err);
        return 1;
    }
    /* libuv writes with write(2): a server that hangs up must not kill us */
    signal(SIGPIPE, SIG_IGN);
    /* one descriptor per stream: lift the soft limit to the hard one */
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct bench_run_cfg cfg = {
        .targets = targets,
        .n_targets = n_targets,
        .keys = (const char *const *)o->keys,
        .n_keys = o->n_keys,
        .endpoint = o->endpoint,
        .max_concurrency = o->max_concurrency,
        .duration_s = o->duration,
        .timeout_s = o->timeout,
        .scrape_metrics = o->scrape,
        .progress = o->progress < 0 ? isatty(2) : o->progress,
    };
    fprintf(stderr, "folio bench: %d requests to %s %s, model %s%s, rate %g/s, concurrency %s\n", n,
            target_desc, o->endpoint, model ? model : "(none)",
            o->n_loras ? " (requests name the --lora-modules)" : "", o->rate,
            o->max_concurrency > 0 ? "bounded" : "unbounded");
    for (int i = 0; i < o->n_replicas; i++)
        bench_replica_scrape(&o->replicas[i], o->metrics_key, 0);
    struct bench_run_out ro;
    int status = 1;
    int rc = bench_run_exec(&cfg, reqs, n, &ro);
    for (int i = 0; !rc && i < o->n_replicas; i++)
        bench_replica_scrape(&o->replicas[i], o->metrics_key, 1);
    if (rc)
        fprintf(stderr, "folio bench: run failed: %s\n", strerror(-rc));
    else
        status = bench_report(o, reqs, n, &ro, target_desc, model);
    for (int32_t i = 0; i < n; i++)
        bench_req_free(&reqs[i]);
    folio_free(reqs);
    bench_run_out_free(&ro);
    return status;
}

int cmd_bench(int argc, char **argv)
{
    struct opts o;
    struct bench_target targets[MAX_TARGETS];
    int n_targets;
    char target_desc[400];
    int status = parse_opts(argc, argv, &o);
    if (status < 0)
        status = open_targets(&o, targets, &n_targets, target_desc, sizeof(target_desc))
                     ? 2
                     : run(&o, targets, n_targets, target_desc);
    for (int i = 0; i < o.n_keys; i++)
        folio_free(o.keys[i]);
    folio_free(o.replica_spec);
    folio_free(o.lora_spec);
    return status;
}
