/*
 * tools/bench_opts.h — `folio bench`'s parsed options, shared by the
 * command (tools/cmd_bench.c: parsing, workload, run) and its report
 * (tools/bench_report.c: reduction, text report, JSON, SVG).
 *
 * Strings point into argv (or, for keys and the replica list, into copies
 * the command owns and frees); nothing here is allocated by the report.
 */
#ifndef FOLIO_TOOLS_BENCH_OPTS_H
#define FOLIO_TOOLS_BENCH_OPTS_H

#include <stdbool.h>
#include <stdint.h>

#include "bench_cluster.h"
#include "bench_run.h"

#define MAX_TARGETS 32
#define MAX_KEYS    64
#define MAX_BIAS    64

enum dataset { DS_RANDOM, DS_PREFIX, DS_TRACE };

struct opts {
    const char *sockets[MAX_TARGETS];
    int n_sockets;
    const char *url;
    const char *endpoint;
    const char *model;
    /* --lora-modules: each request names one of these models at random */
    char *lora_spec; /* split in place */
    const char *loras[16];
    int n_loras;
    enum dataset dataset;
    int32_t input_len, output_len, prefix_len;
    bool prefix_len_set;
    double range_ratio;
    bool text_prompts;
    const char *trace;
    bool ignore_eos;
    double temperature;
    bool temperature_set;
    double top_p; /* sent when set */
    bool top_p_set;
    int32_t top_k; /* sent when > 0 */
    uint64_t seed;
    bool seed_set;
    int32_t bias_tok[MAX_BIAS];
    double bias_val[MAX_BIAS];
    int n_bias;
    char *keys[MAX_KEYS];
    int n_keys;
    double rate, burstiness;
    int max_concurrency;
    int32_t num_prompts;
    double duration, timeout;
    double slo_ttft, slo_tpot, slo_e2el; /* ms, NaN = none */
    const char *json, *plot;
    bool scrape;
    int32_t vocab;
    int progress;       /* -1 auto */
    char *replica_spec; /* --replica-metrics, split in place */
    struct bench_replica_scrape replicas[BENCH_MAX_REPLICAS];
    int n_replicas;
    const char *metrics_key;
};

/* Reduces the finished run's records (reqs[0..n), ro) to the report on
 * stdout and, when asked, the --json and --plot files; returns the exit
 * status: 0 when at least one request succeeded and every file was
 * written, else 1 (with a message on stderr). */
int bench_report(const struct opts *o, const struct bench_req *reqs, int32_t n,
                 const struct bench_run_out *ro, const char *target_desc, const char *model);

#endif
