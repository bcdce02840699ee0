/*
 * tools/sim_trace.h — request traces for `folio sim` (and `folio bench`):
 * read, synthesise, write.
 *
 * Trace file format (text, one request per line, sorted or not by time):
 *
 *     # comment lines and blank lines are ignored
 *     arrival_s  tenant  prompt_len  output_len  prefix_id
 *     0.000      1       212         180         -1
 *     0.031      2       95          400         3
 *
 *   arrival_s   seconds from the start of the run (float, >= 0)
 *   tenant      tenant id (unsigned integer; the daemon uses the peer uid)
 *   prompt_len  prompt tokens (>= 1)
 *   output_len  tokens to generate (>= 1; the request ignores eos)
 *   prefix_id   -1: the prompt is all its own; k >= 0: the prompt starts
 *               with shared prefix k (its first min(prefix_len,
 *               prompt_len - 1) tokens; prefix_len is a run option,
 *               default 128) — requests with the same k share those tokens
 *
 * Prompt token ids are synthesised deterministically from (seed, request
 * index) and, for the shared part, from (seed, prefix_id).
 *
 * Synthetic traces ("ShareGPT-like"): prompt and output lengths lognormal
 * (sigma 1.0) with means 200 and 250 tokens, at least 1, capped so that
 * prompt + output <= the context length; arrivals Poisson (exponential
 * gaps at `rate` per second) or bursty (gamma gaps with shape 1/cv^2, same
 * mean); tenants drawn by share; with `prefixes` > 0 half the requests
 * start with one of that many shared prefixes.
 */
#ifndef FOLIO_TOOLS_SIM_TRACE_H
#define FOLIO_TOOLS_SIM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct sim_trace_req {
    double arrival_s;
    uint32_t tenant;
    int32_t prompt_len, output_len, prefix_id;
};

struct sim_trace {
    struct sim_trace_req *reqs; /* sorted by arrival_s */
    int32_t n;
};

struct sim_tenant_spec {
    uint32_t id;
    double weight, share;
};

struct sim_synth_opts {
    int32_t num;
    double rate; /* requests per second */
    bool bursty;
    double cv; /* bursty: coefficient of variation of the gaps (default 3) */
    uint64_t seed;
    double in_mean, out_mean, sigma;
    int32_t ctx_len;
    int32_t prefixes;
    const struct sim_tenant_spec *tenants;
    int32_t n_tenants;
};

/* Parses trace text: '#' starts a comment (also after the fields), fields
 * are separated by blanks, a bad line is -EINVAL with "line N: <field>
 * ..." in err.  Sorted by arrival, equal arrivals in file order.  No
 * request is not an error here. */
int sim_trace_parse(const char *text, size_t n, struct sim_trace *t, char *err, size_t errlen);
/* The same from a file; errors start with the path; an empty trace is
 * -EINVAL. */
int sim_trace_load(const char *path, struct sim_trace *t, char *err, size_t errlen);
int sim_trace_synth(const struct sim_synth_opts *o, struct sim_trace *t);
int sim_trace_write(const struct sim_trace *t, FILE *out);
void sim_trace_free(struct sim_trace *t);

/* Parses "ID[:WEIGHT[:SHARE]],..." (weight and share default 1). */
int sim_tenants_parse(const char *spec, struct sim_tenant_spec **out, int32_t *n);

/* The prompt of request i: tokens in 1..vocab-1. */
void sim_trace_prompt(const struct sim_trace *t, int32_t i, uint64_t seed, int32_t prefix_len,
                      int32_t vocab, int32_t *out);

#endif
