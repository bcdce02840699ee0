/*
 * tests/integration/fake_engine.c — foliod_fake: the server with the real
 * backend (scheduler + pager, daemon/backend.h) and a deterministic step
 * function instead of a model, so the server, the scheduler and the pager
 * are tested together without a model's arithmetic.
 *
 * Tokens: the i-th generated token of a request is a pure function of
 * (seed, prompt, i) — seed ignored at temperature 0 — so a stream is
 * identical alone, under load and across preemptions (the scheduler's
 * token_index is stable).  Generated ids are in [3, 512); logit_bias
 * +100 forces a token (forcing 2 = EOS ends the sequence unless
 * ignore_eos).  Text: ids < 256 are single bytes (so output exercises the
 * UTF-8 holdback), others are words " wNNN".  Prompt logprobs: prompt
 * token i (i >= 1) scores -i/64 with rank 1 and itself alone on top.
 * Hidden states (embeddings): FAKE_EMBD values in (-1, 1), a pure
 * function of the token alone (not its position), so a mean-pooled
 * embedding does not depend on the order of the prompt's tokens and a
 * last-token one on its last token only.
 * The pool is bookkeeping
 * only (no K/V memory), sized as 4096 bytes per token slot.
 *
 * Env: FOLIO_FAKE_STEP_US (default 1000) sleeps in run() to make steps
 * take time, FOLIO_FAKE_CTX (default 2048) sets the context length,
 * FOLIO_FAKE_FAIL_AT=N makes a request's step fail when it samples its
 * N-th token (an engine error), FOLIO_FAKE_NAME names the model (default
 * fake-tiny), FOLIO_FAKE_TOKENIZER=bytes gives it a tokenizer of one
 * token per byte (ids 0..255, as detok reads them back; else it has none,
 * and text prompts are refused).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend.h"
#include "folio/common.h"
#include "server.h"

#define VOCAB     512
#define EOS       2
#define FAKE_EMBD 8

struct fake {
    unsigned step_us;
    int32_t ctx;
    const char *name; /* FOLIO_FAKE_NAME: any bytes, for the name sanitizing test */
    int32_t fail_at;  /* a slice sampling token number fail_at fails (-EIO); -1 never */
    bool bytes;       /* FOLIO_FAKE_TOKENIZER=bytes: one token per byte */
};

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static void f_info(void *ctx, struct eng_model_info *mi)
{
    struct fake *f = ctx;
    mi->name = f->name;
    mi->n_vocab = VOCAB;
    mi->ctx_len = f->ctx;
    mi->eos_id = EOS;
    mi->n_embd = FAKE_EMBD;
    mi->pooling = -1;
    mi->has_tokenizer = f->bytes;
    mi->chat_template_rc = -ENOENT; /* none in the "file": chatml as plain text */
}

/* Token tok's hidden state. */
static void fake_hidden(int32_t tok, float *h)
{
    for (int k = 0; k < FAKE_EMBD; k++)
        h[k] =
            (float)((double)(mix((uint64_t)tok * FAKE_EMBD + (uint64_t)k) >> 11) * 0x1p-52 - 1.0);
}

/* Token number i of request r. */
static int32_t fake_token(const struct eng_req *r, int32_t i)
{
    uint64_t h = 1469598103934665603ull;
    for (int32_t k = 0; k < r->n_prompt; k++)
        h = (h ^ (uint64_t)(uint32_t)r->prompt[k]) * 1099511628211ull;
    uint64_t seed = r->g.sp.temperature == 0 ? 0 : r->g.sp.seed;
    uint64_t x = mix(seed ^ h ^ mix((uint64_t)i + 1));
    int32_t tok = 3 + (int32_t)(x % (VOCAB - 3));
    for (int32_t k = 0; k < r->g.sp.n_bias; k++)
        if (r->g.sp.bias[k].bias >= 100)
            tok = r->g.sp.bias[k].token;
    return tok;
}

static void f_run(void *ctx, const struct sched_batch *batch, int32_t *sampled,
                  struct sampler_result *res, struct sampler_result *plp, float *hidden,
                  int *slice_rc)
{
    struct fake *f = ctx;
    if (f->step_us)
        usleep(f->step_us);
    const int32_t *tokens = batch->mb.tokens;
    for (int32_t i = 0; i < batch->mb.n_slices; i++) {
        const struct sched_slice *s = &batch->info[i];
        const int32_t n_tok = batch->mb.slices[i].n_tokens;
        slice_rc[i] = 0;
        for (int32_t j = 0; s->hid_row >= 0 && j < n_tok; j++)
            fake_hidden(tokens[j], hidden + (size_t)(s->hid_row + j) * FAKE_EMBD);
        tokens += n_tok;
        for (int32_t j = 0; j < s->plp_n; j++) {
            const struct eng_req *r = eng_slice_req(s, NULL, NULL);
            int32_t t = s->plp_first + j + 1; /* the prompt token scored */
            float lp = -(float)t / 64;
            plp[s->plp_index + j] = (struct sampler_result){
                .token = r->prompt[t],
                .logprob = lp,
                .rank = 1,
                .n_top = r->g.n_prompt_logprobs > 0,
                .top_ids = {r->prompt[t]},
                .top_logprobs = {lp},
            };
        }
        if (s->sample_row < 0)
            continue;
        struct sampler_params sp;
        const struct eng_req *r = eng_slice_req(s, &sp, NULL);
        if (s->token_index == f->fail_at) {
            slice_rc[i] = -EIO;
            continue;
        }
        int32_t tok = fake_token(r, s->token_index);
        for (int32_t k = 0; k < sp.n_banned; k++) /* min_tokens: a banned id becomes 3 */
            if (sp.banned[k] == tok)
                tok = 3;
        sampled[s->sample_row] = tok;
        if (r->g.n_logprobs >= 0) /* a certain draw: logprob 0, the token alone on top */
            res[s->sample_row] = (struct sampler_result){
                .token = tok, .logprob = 0, .n_top = 1, .top_ids = {tok}, .top_logprobs = {0}};
    }
}

static int f_detok(void *ctx, int32_t tok, char *buf, size_t cap)
{
    (void)ctx;
    if (tok < 0 || tok >= VOCAB)
        return -EINVAL;
    if (tok < 256) {
        buf[0] = (char)tok;
        return 1;
    }
    return snprintf(buf, cap, " w%03d", tok - 256);
}

static int f_tokenize(void *ctx, const char *text, size_t n, bool parse_special, int32_t **out,
                      int32_t *n_out)
{
    (void)ctx;
    (void)parse_special;
    int32_t *t = folio_malloc((n ? n : 1) * sizeof(*t));
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        t[i] = (unsigned char)text[i];
    *out = t;
    *n_out = (int32_t)n;
    return 0;
}

static bool f_is_eog(void *ctx, int32_t tok)
{
    (void)ctx;
    return tok == EOS;
}

static void f_free(void *ctx)
{
    folio_free(ctx);
}

static const struct eng_step fake_step = {
    .kind = "fake",
    .info = f_info,
    .run = f_run,
    .detok = f_detok,
    .tokenize = NULL,
    .is_eog = f_is_eog,
    .free = f_free,
};

static int fake_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops,
                        void **out, char *err, size_t errlen)
{
    struct fake *f = folio_calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    const char *e = getenv("FOLIO_FAKE_STEP_US");
    f->step_us = e ? (unsigned)atoi(e) : 1000;
    e = getenv("FOLIO_FAKE_CTX");
    f->ctx = e ? atoi(e) : 2048;
    e = getenv("FOLIO_FAKE_FAIL_AT");
    f->fail_at = e ? atoi(e) : -1;
    e = getenv("FOLIO_FAKE_NAME");
    f->name = e ? e : "fake-tiny";
    e = getenv("FOLIO_FAKE_TOKENIZER");
    f->bytes = e && !strcmp(e, "bytes");
    /* f32 K+V of 1 layer x 1 head x 512 dims: 4096 bytes per token slot */
    struct eng_geom g = {1, 1, 512, f->ctx, true, 0, FOLIO_F32, VOCAB, FAKE_EMBD};
    struct eng_backend *be;
    int rc = eng_backend_new(cfg, &g, &be, err, errlen);
    if (rc) {
        folio_free(f);
        return rc;
    }
    static struct eng_step with_bytes; /* fake_step with the byte tokenizer */
    with_bytes = fake_step;
    with_bytes.tokenize = f_tokenize;
    if ((rc = eng_backend_set_step(be, f->bytes ? &with_bytes : &fake_step, f))) {
        eng_backend_ops.free(be);
        return rc;
    }
    *ops = &eng_backend_ops;
    *out = be;
    return 0;
}

int main(int argc, char **argv)
{
    return srv_main(argc, argv, fake_factory);
}
