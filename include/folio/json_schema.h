/*
 * folio/json_schema.h — JSON Schema (a subset) to a grammar (folio/grammar.h)
 * whose documents are exactly JSON texts valid against the schema, in the
 * shape foliod generates them: properties in schema order, at most one
 * space between tokens, no escapes but \" \\ \/ \b \f \n \r \t, numbers of
 * at most 16 integer and 15 fraction digits.
 *
 * Supported keywords:
 *   type (a name or a list), enum, const, properties, required,
 *   additionalProperties (false, true or a schema: only declared
 *   properties are generated, so true and false give the same documents;
 *   a schema with no properties gives a map of it), items, minItems,
 *   maxItems, minLength, maxLength (<= 1000), anyOf, nullable, $ref to
 *   "#", "#/$defs/NAME" or "#/definitions/NAME" (recursion allowed), $defs,
 *   definitions; annotations are ignored (title, description, default,
 *   examples, $schema, $id, $comment, deprecated, readOnly, writeOnly,
 *   strict).
 * Anything else (pattern, format, minimum, oneOf, allOf, ...) is -ENOTSUP
 * with err naming the keyword: its constraint would not be enforced.
 *
 * A builder collects schemas as rules of one grammar, so tool calls can
 * hold several schemas under one root.  Not thread-safe per builder.
 */
#ifndef FOLIO_JSON_SCHEMA_H
#define FOLIO_JSON_SCHEMA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct js_gbnf js_gbnf_t;

int js_gbnf_new(js_gbnf_t **out);
void js_gbnf_free(js_gbnf_t *b);
/* Adds schema (JSON text); *rule (owned by b, valid until js_gbnf_free)
 * names the grammar rule matching its documents.  0, -EINVAL (not JSON, or
 * a malformed schema), -ENOTSUP (an unsupported keyword), -ENOMEM; err
 * says which. */
int js_gbnf_add(js_gbnf_t *b, const char *schema, size_t len, const char **rule, char *err,
                size_t errlen);
/* The rule matching any JSON object ("json_object" mode). */
const char *js_gbnf_any_object(js_gbnf_t *b);
/* Appends raw grammar text (e.g. the caller's root rule). */
int js_gbnf_append(js_gbnf_t *b, const char *text);
/* Appends s as a grammar literal ("..." with escapes). */
int js_gbnf_literal(js_gbnf_t *b, const char *s, size_t n);
/* The grammar text so far (NUL-terminated, owned by b). */
const char *js_gbnf_text(const js_gbnf_t *b, size_t *len);

/* Convenience: the whole grammar for one schema (root = its rule); *gbnf
 * is folio_malloc'd. */
int json_schema_to_gbnf(const char *schema, size_t len, char **gbnf, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* FOLIO_JSON_SCHEMA_H */
