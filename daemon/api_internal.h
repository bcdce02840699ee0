/*
 * daemon/api_internal.h — shared by api.c, api_fields.c (the request
 * table) and api_chat.c (request parsing); not for the rest of the daemon.
 */
#ifndef FOLIO_DAEMON_API_INTERNAL_H
#define FOLIO_DAEMON_API_INTERNAL_H

#include <cjson/cJSON.h>

#include "api.h"

/* Fills *err with a 400 naming param and returns -EINVAL. */
#define BAD(param, ...)                                                                            \
    do {                                                                                           \
        srv_api_error_set(err, 400, "invalid_request_error", param, NULL, __VA_ARGS__);            \
        return -EINVAL;                                                                            \
    } while (0)

/* Counts one unknown field and appends prefix + name to names (comma
 * separated, SRV_UNKNOWN_CAP bytes, truncated). */
void srv__note_unknown(char *names, int *n, const char *prefix, const char *name);

/* Appends one prompt (takes toks and text, which may be NULL, whatever
 * happens).  0, -EINVAL (too many prompts), -ENOMEM. */
int srv__add_prompt(struct srv_comp_params *p, int32_t *toks, int32_t n, char *text,
                    struct srv_api_error *err);
/* `messages` rendered with template tmpl and tokenized: one prompt. */
int srv__chat_messages(const cJSON *v, int tmpl, srv_tokenize_fn tok, void *tok_ctx,
                       struct srv_comp_params *p, struct srv_api_error *err);

/* /v1/rerank (api_rerank.c): the `query` row's parser; the prompts of
 * `documents` / `texts` (v, an array) as srv_rerank_parse says. */
int srv__parse_query(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                     struct srv_api_error *err);
/* /v1/score's `text_1` row: a string or a list of strings (rr.queries). */
int srv__parse_text_1(const void *json, const struct eng_model_info *mi, struct srv_comp_params *p,
                      struct srv_api_error *err);
int srv__rerank_prompts(const cJSON *v, const struct eng_model_info *mi, srv_tokenize_fn tok,
                        void *tok_ctx, struct srv_comp_params *p, struct srv_api_error *err);

/* A request body's JSON, checked as every route checks it: valid UTF-8,
 * no NUL (raw or escaped), one value and nothing after it.  NULL with a
 * 400 in *err. */
cJSON *srv__parse_root(const char *body, size_t len, struct srv_api_error *err);

/* A content value's text (Messages' and Responses' bodies): a string,
 * or an array of parts {type, text} whose type is one of `types`
 * (NULL-terminated), joined; their other fields (annotations,
 * cache_control, ...) ignored.  Errors are 400s naming param, the value
 * called `what` in the message.  *out is folio_malloc'd. */
int srv__parts_text(const cJSON *c, const char *const *types, const char *param, const char *what,
                    char **out, struct srv_api_error *err);
/* Appends {role, content: text} to the array arr (takes text, which may
 * be NULL: out of memory).  0 or -ENOMEM. */
int srv__add_message(cJSON *arr, const char *role, char *text);

/* A request body's top level: an object with no key given twice (each
 * field is parsed once).  0, or -EINVAL with a 400 (naming the key). */
int srv__object_once(const cJSON *obj, struct srv_api_error *err);

/* Typed JSON readers: 0, or -EINVAL with a 400 naming `name` in *err.
 * get_int: an integral number in [lo, hi]; get_num: a finite number in
 * [lo, hi] ((lo, hi] when lo_open). */
int srv__get_int(const cJSON *v, const char *name, double lo, double hi, int64_t *out,
                 struct srv_api_error *err);
int srv__get_num(const cJSON *v, const char *name, double lo, double hi, bool lo_open, double *out,
                 struct srv_api_error *err);
int srv__get_bool(const cJSON *v, const char *name, bool *out, struct srv_api_error *err);

/* The request table's rows (api_fields.c): a row's default stored in p;
 * one value parsed by its row (bounds checked, stored at its offset, or
 * its custom parser). */
void srv__field_default(const struct srv_field *f, struct srv_comp_params *p);
int srv__field_parse(const struct srv_field *f, const cJSON *v, const struct eng_model_info *mi,
                     struct srv_comp_params *p, struct srv_api_error *err);

#endif
