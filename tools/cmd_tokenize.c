/*
 * tools/cmd_tokenize.c — `folio tokenize`: encode text (or decode ids) with
 * a GGUF file's tokenizer, or render a chat with its template; for looking
 * at what the model sees.
 *
 *   folio tokenize --model FILE [--special] [--no-bos] TEXT
 *   folio tokenize --model FILE --decode 1,2,3
 *   folio tokenize --model FILE --chat [--template NAME] USER_MESSAGE
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "folio/chat.h"
#include "folio/common.h"
#include "folio/gguf.h"
#include "folio/tokenizer.h"
#include "folio_cmds.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: folio tokenize --model FILE [--special] [--no-bos] TEXT\n"
                 "       folio tokenize --model FILE --decode ID,ID,...\n"
                 "       folio tokenize --model FILE --chat [--template NAME] MESSAGE\n"
                 "Prints one line per token: id, type and piece (as a C string).\n"
                 "  --special   recognise control tokens written in TEXT\n"
                 "  --no-bos    do not add BOS/EOS\n"
                 "  --chat      render MESSAGE as a user turn with the model's chat\n"
                 "              template (or --template NAME) and tokenize that\n");
}

static void print_escaped(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            printf("\\n");
        else if (c == '\t')
            printf("\\t");
        else if (c < 0x20 || c == 0x7f || (n == 1 && c >= 0x80))
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static const char *type_name(int ty)
{
    static const char *names[] = {"?",        "normal", "unknown", "control",
                                  "user-def", "unused", "byte"};
    return ty >= 0 && ty <= 6 ? names[ty] : "?";
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *decode = NULL, *tmpl = NULL, *text = NULL;
    bool special = false, add = true, chat = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--model") && i + 1 < argc)
            model = argv[++i];
        else if (!strcmp(argv[i], "--decode") && i + 1 < argc)
            decode = argv[++i];
        else if (!strcmp(argv[i], "--template") && i + 1 < argc)
            tmpl = argv[++i];
        else if (!strcmp(argv[i], "--special"))
            special = true;
        else if (!strcmp(argv[i], "--no-bos"))
            add = false;
        else if (!strcmp(argv[i], "--chat"))
            chat = true;
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] != '-' && !text)
            text = argv[i];
        else {
            usage(stderr);
            return 2;
        }
    }
    if (!model || (!text && !decode)) {
        usage(stderr);
        return 2;
    }
    char err[512];
    gguf_file_t *f;
    tok_t *t;
    if (gguf_open(model, &f, err, sizeof(err)) != 0) {
        fprintf(stderr, "folio tokenize: %s\n", err);
        return 1;
    }
    if (tok_load(f, &t, err, sizeof(err)) != 0) {
        fprintf(stderr, "folio tokenize: %s\n", err);
        gguf_close(f);
        return 1;
    }
    int status = 1;
    char *buf = NULL;
    int32_t *ids = NULL;
    if (decode) {
        size_t cap = strlen(decode) / 2 + 2, n = 0;
        ids = malloc(sizeof(int32_t) * cap);
        for (char *p = (char *)decode, *end; *p; p = *end ? end + 1 : end) {
            long v = strtol(p, &end, 10);
            if (end == p || (*end && *end != ',')) {
                fprintf(stderr, "folio tokenize: bad id list '%s'\n", decode);
                goto out;
            }
            ids[n++] = (int32_t)v;
        }
        size_t need = 0;
        int rc = tok_decode(t, ids, n, special ? TOK_DECODE_SPECIAL : 0, NULL, 0, &need);
        if (rc != 0 && rc != -ENOSPC) {
            fprintf(stderr, "folio tokenize: an id is outside the vocabulary (%d tokens)\n",
                    tok_n_vocab(t));
            goto out;
        }
        buf = malloc(need + 1);
        tok_decode(t, ids, n, special ? TOK_DECODE_SPECIAL : 0, buf, need, &need);
        fwrite(buf, 1, need, stdout);
        putchar('\n');
        status = 0;
        goto out;
    }
    const char *input = text;
    if (chat) {
        enum chat_template ct;
        int rc = tmpl ? chat_template_by_name(tmpl, &ct, err, sizeof(err))
                      : chat_template_from_gguf(f, &ct, err, sizeof(err));
        if (rc) {
            fprintf(stderr, "folio tokenize: %s\n", err);
            goto out;
        }
        struct chat_msg m = {"user", text};
        size_t need = 0;
        chat_render(ct, &m, 1, true, NULL, 0, &need, NULL, 0);
        buf = malloc(need + 1);
        if (chat_render(ct, &m, 1, true, buf, need + 1, &need, err, sizeof(err)) != 0) {
            fprintf(stderr, "folio tokenize: %s\n", err);
            goto out;
        }
        printf("template %s:\n%s\n---\n", chat_template_name(ct), buf);
        input = buf;
        special = true;
    }
    int32_t n = 0;
    tok_encode(t, input, strlen(input), add, special, NULL, 0, &n);
    ids = malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (tok_encode(t, input, strlen(input), add, special, ids, n, &n) != 0) {
        fprintf(stderr, "folio tokenize: encoding failed\n");
        goto out;
    }
    for (int32_t i = 0; i < n; i++) {
        size_t l;
        const char *p = tok_piece(t, ids[i], TOK_DECODE_SPECIAL, &l);
        printf("%6d  %-8s ", ids[i], type_name(tok_token_type(t, ids[i])));
        print_escaped(p, l);
        putchar('\n');
    }
    printf("%d tokens, %zu bytes\n", n, strlen(input));
    status = 0;
out:
    free(buf);
    free(ids);
    tok_free(t);
    gguf_close(f);
    return status;
}
