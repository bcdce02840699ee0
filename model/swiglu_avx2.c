/*
 * model/swiglu_avx2.c — model/swiglu_body.h with 8 lanes, built with
 * -mavx2 -ffp-contract=off (model_internal.h: model__swiglu_avx2).
 */
#define SW          8
#define SWIGLU_NAME model__swiglu_avx2
#include "model_internal.h"
#include "swiglu_body.h"
