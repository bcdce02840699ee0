/*
 * daemon/main.c — foliod: the server (server.c) with the model engine
 * (engine_model.c).
 */
#include "engine.h"
#include "folio/model.h"
#include "server.h"

int eng_model_factory(const struct srv_config *cfg, const struct eng_backend_ops **ops, void **b,
                      char *err, size_t errlen);

int main(int argc, char **argv)
{
    srv_matmul_built = model_matmul_onednn_built() ? "openblas onednn" : "openblas";
    return srv_main(argc, argv, eng_model_factory);
}
