/*
 * daemon/engine_model.c — the real backend: scheduler (scheduler/) + model
 * forward and sampler (model/) behind daemon/engine.h.
 *
 * Until the scheduler and the forward pass are merged, this backend
 * reports that it is unavailable and foliod refuses to start with that
 * message; the server itself is exercised with a deterministic fake
 * backend (tests/integration/fake_engine.c).
 */
#include <errno.h>
#include <stdio.h>

#include "engine.h"

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **b,
                      char *err, size_t errlen);

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **b,
                      char *err, size_t errlen)
{
    (void)cfg;
    (void)ops;
    (void)b;
    snprintf(err, errlen, "the model engine (scheduler + forward pass) is not built in yet");
    return -ENOSYS;
}
