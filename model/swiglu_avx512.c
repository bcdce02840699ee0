/*
 * model/swiglu_avx512.c — model/swiglu_body.h with 16 lanes, built with
 * -mavx512f -ffp-contract=off (model_internal.h: model__swiglu_avx512).
 */
#define SW          16
#define SWIGLU_NAME model__swiglu_avx512
#include "model_internal.h"
#include "swiglu_body.h"
