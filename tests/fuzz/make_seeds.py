#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py — writes the fuzzers' seed corpora.

    tests/fuzz/make_seeds.py            (from anywhere; rewrites corpus/)

corpus/gguf/: small GGUF files written here by an independent writer (no
foliod code): micro llama models (dim 32, one or two layers) with a
SentencePiece or a byte-level BPE vocabulary, F32/F16/BF16/Q8_0 tensors,
each known pre-tokenizer name and chat template family, version 2 and 3,
general.alignment 64, every metadata value type, a tokenizer-only file.

corpus/tokenizer/: the strings of tests/data/tokenizer/*.inp, each behind
an option byte (fuzz_tokenizer.c: low 5 bits pick the vocabulary, bits
5-7 the encode/decode flags), plus chat markup and special-token text.

corpus/request/: completion, chat, /tokenize and /detokenize bodies
behind fuzz_request.c's option byte.  corpus/http/: request streams
(pipelined, streamed, held, failed, HTTP/1.0, Expect, chunked, malformed)
behind fuzz_http.c's option byte.

The output depends only on this script and tests/data (no randomness
beyond a fixed seed), so rerunning it changes nothing unless those did.
"""
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tokenizer")

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
T_F32, T_F16, T_Q8_0, T_BF16 = 0, 1, 8, 30


def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b


SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i",
          F32: "<f", BOOL: "<?", U64: "<Q", I64: "<q", F64: "<d"}


def gval(t, v):
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        out = struct.pack("<IQ", et, len(items))
        for x in items:
            out += gval(et, x)
        return out
    return struct.pack(SCALAR[t], v)


def tensor_bytes(ttype, values):
    if ttype == T_F32:
        return struct.pack("<%df" % len(values), *values)
    if ttype == T_F16:
        return struct.pack("<%de" % len(values), *values)
    if ttype == T_BF16:
        return b"".join(struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0])[2:]
                        for x in values)
    if ttype == T_Q8_0:
        out = b""
        for i in range(0, len(values), 32):
            blk = values[i:i + 32]
            amax = max(abs(x) for x in blk) or 1.0
            d = amax / 127
            out += struct.pack("<e", d) + bytes((round(x / d) & 0xff) for x in blk)
        return out
    raise ValueError(ttype)


def gguf(kvs, tensors, version=3, alignment=32):
    """kvs: [(key, type, value)]; tensors: [(name, type, ne, values)]."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, v in kvs:
        head += gstr(k) + struct.pack("<I", t) + gval(t, v)
    blobs, off = [], 0
    infos = b""
    for name, ttype, ne, values in tensors:
        data = tensor_bytes(ttype, values)
        infos += gstr(name) + struct.pack("<I", len(ne))
        infos += b"".join(struct.pack("<Q", n) for n in ne)
        infos += struct.pack("<IQ", ttype, off)
        pad = (-len(data)) % alignment
        blobs.append(data + b"\0" * pad)
        off += len(data) + pad
    out = head + infos
    out += b"\0" * ((-len(out)) % alignment)
    return out + b"".join(blobs)


def spm_vocab(n=64):
    toks = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in (0x0A, 0x20, 0x41, 0xE2)]
    words = ["\u2581the", "\u2581a", "he", "ll", "o", "\u2581", "t", "h", "e", "l",
             "w", "r", "d", "\u2581w", "or", "ld", "\u2581hello", "\u2581world", "1", "2"]
    toks += words
    while len(toks) < n:
        toks.append("x%d" % len(toks))
    types = [2, 3, 3] + [6] * 4 + [1] * (n - 7)
    scores = [0.0] * 7 + [-float(i) for i in range(n - 7)]
    return toks, types, scores


BYTE_ALPHABET = [b for b in range(256)
                 if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]


def bpe_vocab():
    b2u, nxt = {}, 256
    for b in range(256):
        if b in BYTE_ALPHABET:
            b2u[b] = chr(b)
        else:
            b2u[b] = chr(nxt)
            nxt += 1
    toks = [b2u[b] for b in range(256)]
    merges = ["\u0120 t", "h e", "\u0120t he", "l l", "he ll", "hell o", "\u0120 w", "o r",
              "\u0120w or", "\u0120wor l", "\u0120worl d", "1 2"]
    for m in merges:
        toks.append(m.replace(" ", ""))
    toks += ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [1] * (len(toks) - 3) + [3, 3, 3]
    return toks, types, merges


def micro_model(tok_kvs, n_vocab, ttype=T_F16, layers=1, extra=()):
    dim, heads, kv_heads, ffn = 32, 4, 2, 32
    hd = dim // heads
    rnd = random.Random(1234)

    def vals(n):
        return [rnd.uniform(-1, 1) for _ in range(n)]

    kvs = [("general.architecture", STR, "llama"),
           ("general.name", STR, "micro"),
           ("llama.context_length", U32, 64),
           ("llama.embedding_length", U32, dim),
           ("llama.block_count", U32, layers),
           ("llama.feed_forward_length", U32, ffn),
           ("llama.attention.head_count", U32, heads),
           ("llama.attention.head_count_kv", U32, kv_heads),
           ("llama.rope.dimension_count", U32, hd),
           ("llama.rope.freq_base", F32, 10000.0),
           ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
           ("llama.vocab_size", U32, n_vocab)] + list(tok_kvs) + list(extra)
    ts = [("token_embd.weight", ttype, [dim, n_vocab], vals(dim * n_vocab))]
    for layer in range(layers):
        p = "blk.%d." % layer
        ts += [(p + "attn_norm.weight", T_F32, [dim], vals(dim)),
               (p + "attn_q.weight", ttype, [dim, heads * hd], vals(dim * heads * hd)),
               (p + "attn_k.weight", ttype, [dim, kv_heads * hd], vals(dim * kv_heads * hd)),
               (p + "attn_v.weight", ttype, [dim, kv_heads * hd], vals(dim * kv_heads * hd)),
               (p + "attn_output.weight", ttype, [heads * hd, dim], vals(dim * heads * hd)),
               (p + "ffn_norm.weight", T_F32, [dim], vals(dim)),
               (p + "ffn_gate.weight", ttype, [dim, ffn], vals(dim * ffn)),
               (p + "ffn_up.weight", ttype, [dim, ffn], vals(dim * ffn)),
               (p + "ffn_down.weight", ttype, [ffn, dim], vals(dim * ffn))]
    ts.append(("output_norm.weight", T_F32, [dim], vals(dim)))
    return kvs, ts


CHAT_TEMPLATES = {
    "chatml": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
              "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    "llama3": "{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
              "{{ m['content'] | trim }}<|eot_id|>{% endfor %}",
    "phi3": "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}",
    "mistral": "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}[INST] "
               "{{ m['content'] }} [/INST]{% else %}{{ m['content'] }}{{ eos_token }}{% endif %}"
               "{% endfor %}",
    "deepseek": "{% for m in messages %}{% if m['role'] == 'user' %}<\uff5cUser\uff5c>"
                "{{ m['content'] }}{% else %}<\uff5cAssistant\uff5c>{{ m['content'] }}"
                "<\uff5cend\u2581of\u2581sentence\uff5c>{% endif %}{% endfor %}",
}

PRE_NAMES = ["gpt-2", "default", "llama-bpe", "llama3", "qwen2", "deepseek-llm",
             "deepseek-coder", "falcon", "starcoder", "refact", "mpt", "smollm", "command-r",
             "gpt-4o", "no-such-pre-tokenizer"]


def write(path, data):
    with open(path, "wb") as fp:
        fp.write(data)


def gguf_seeds(out):
    os.makedirs(out, exist_ok=True)
    toks, types, scores = spm_vocab()
    spm = [("tokenizer.ggml.model", STR, "llama"),
           ("tokenizer.ggml.tokens", ARR, (STR, toks)),
           ("tokenizer.ggml.scores", ARR, (F32, scores)),
           ("tokenizer.ggml.token_type", ARR, (I32, types)),
           ("tokenizer.ggml.bos_token_id", U32, 1),
           ("tokenizer.ggml.eos_token_id", U32, 2),
           ("tokenizer.ggml.unknown_token_id", U32, 0),
           ("tokenizer.ggml.add_bos_token", BOOL, True)]
    for ttype, name in ((T_F16, "f16"), (T_F32, "f32"), (T_Q8_0, "q8_0"), (T_BF16, "bf16")):
        kvs, ts = micro_model(spm, len(toks), ttype)
        write(os.path.join(out, "micro-spm-%s.gguf" % name), gguf(kvs, ts))
    kvs, ts = micro_model(spm, len(toks), T_F16, layers=2,
                          extra=[("general.alignment", U32, 64)])
    write(os.path.join(out, "micro-spm-2layers-align64.gguf"), gguf(kvs, ts, alignment=64))
    kvs, ts = micro_model(spm, len(toks), T_F16)
    write(os.path.join(out, "micro-spm-v2.gguf"), gguf(kvs, ts, version=2))

    btoks, btypes, merges = bpe_vocab()
    for pre in PRE_NAMES:
        bpe = [("tokenizer.ggml.model", STR, "gpt2"),
               ("tokenizer.ggml.pre", STR, pre),
               ("tokenizer.ggml.tokens", ARR, (STR, btoks)),
               ("tokenizer.ggml.token_type", ARR, (I32, btypes)),
               ("tokenizer.ggml.merges", ARR, (STR, merges)),
               ("tokenizer.ggml.eos_token_id", U32, len(btoks) - 3)]
        kvs, ts = micro_model(bpe, len(btoks), T_Q8_0)
        write(os.path.join(out, "micro-bpe-%s.gguf" % pre), gguf(kvs, ts))
    for name, src in CHAT_TEMPLATES.items():
        kvs = [("general.architecture", STR, "llama"),
               ("tokenizer.ggml.model", STR, "llama"),
               ("tokenizer.ggml.tokens", ARR, (STR, toks)),
               ("tokenizer.ggml.token_type", ARR, (I32, types)),
               ("tokenizer.chat_template", STR, src)]
        write(os.path.join(out, "vocab-only-chat-%s.gguf" % name), gguf(kvs, []))

    every = [("u8", U8, 200), ("i8", I8, -5), ("u16", U16, 60000), ("i16", I16, -300),
             ("u32", U32, 4000000000), ("i32", I32, -7), ("f32", F32, 1.5), ("bool", BOOL, True),
             ("str", STR, "h\u00e9llo"), ("u64", U64, 2 ** 63), ("i64", I64, -2 ** 40),
             ("f64", F64, 2.25)]
    kvs = [("t." + k, t, v) for k, t, v in every]
    for k, t, v in every:
        kvs.append(("a." + k, ARR, (t, [v, v])))
    kvs.append(("a.empty", ARR, (U8, [])))
    ts = [("a", T_F32, [4], [1.0, 2.0, 3.0, 4.0]),
          ("b", T_F16, [2, 2], [0.5, -0.5, 1.0, 2.0]),
          ("c", T_BF16, [3], [1.0, -1.0, 3.0]),
          ("d", T_Q8_0, [32, 2], [i / 7 for i in range(64)]),
          ("e", T_F32, [1, 1, 1, 2], [7.0, 8.0])]
    write(os.path.join(out, "every-type.gguf"), gguf(kvs, ts))
    write(os.path.join(out, "empty.gguf"), gguf([], []))


def tokenizer_seeds(out):
    os.makedirs(out, exist_ok=True)
    vocabs = ["llama-spm", "gpt-2", "falcon", "starcoder", "deepseek-coder"]
    texts = []
    for v in vocabs:
        with open(os.path.join(DATA, "ggml-vocab-%s.gguf.inp" % v), "rb") as fp:
            for s in fp.read().split(b"\n__ggml_vocab_test__\n"):
                if s not in texts:
                    texts.append(s)
    texts += [b"<s>[INST] hi [/INST]</s>", b"<|im_start|>user\nhi<|im_end|>\n<|endoftext|>",
              b"\xff\xfe bad \xc3 utf8 \xe2\x96\x81 spm space", b"x" * 300,
              "\u00e9\u4e2d\u6587 \U0001f999 \u200d\ufe0f".encode()]
    n_vocabs = 6  # synthetic + the five files (fuzz_tokenizer.c)
    i = 0
    for s in texts:
        if not s:
            continue
        opt = (i % n_vocabs) | ((i // n_vocabs) % 8) << 5
        write(os.path.join(out, "text-%03d" % i), bytes([opt]) + s)
        i += 1


COMPLETION_BODIES = [
    b'{"prompt":[1,2,3],"max_tokens":4}',
    b'{"model":"fuzz-model","prompt":"hello","max_tokens":8,"temperature":0.7,"top_p":0.9,'
    b'"top_k":40,"seed":7,"n":3,"stop":["x","yz"],"logprobs":2,"echo":true,"stream":true,'
    b'"stream_options":{"include_usage":true},"logit_bias":{"5":-100,"6":100},"user":"u",'
    b'"ignore_eos":false,"frequency_penalty":0,"presence_penalty":0}',
    b'{"prompt":[[1,2],[3,4,5]],"n":2}',
    b'{"prompt":["a","b\\u00e9c"],"max_tokens":1}',
    b'{"prompt":"a\\u0000b"}',
    b'{"prompt":[1],"stop":"\\ud83d\\ude00"}',
    b'{"prompt":[1e3,-1,2.5],"max_tokens":1e9}',
    b'{"prompt":[1]}   \n',
    b'{"prompt":[1]} trailing',
    b'[1,2,3]',
    b'{"prompt":[1],"prompt":[2]}',
]
CHAT_BODIES = [
    b'{"messages":[{"role":"user","content":"hi"}],"max_tokens":5}',
    b'{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text",'
    b'"text":"a"},{"type":"text","text":"b"}]},{"role":"assistant","content":"c"}],'
    b'"max_completion_tokens":3,"stream":true,"seed":1}',
    b'{"messages":[]}',
    b'{"messages":[{"role":"tool","content":"x"}]}',
    b'{"messages":[{"role":"user","content":"<|im_start|>x\\u0000"}]}',
]
SMALL_BODIES = [
    b'{"prompt":"hello world"}',
    b'{"prompt":"x","model":"fuzz-model"}',
    b'{"tokens":[1,2,3]}',
    b'{"tokens":[511,0,-1,512]}',
    b'{"tokens":[],"model":"other"}',
]
EMBED_BODIES = [
    b'{"input":"hello"}',
    b'{"input":["a","bc"],"encoding_format":"base64","dimensions":8,"model":"fuzz-model"}',
    b'{"input":[[1,2],[3]],"normalize":false,"embd_normalize":3,"truncate_prompt_tokens":-1}',
    b'{"input":[],"dimensions":0}',
    b'{"input":[1,2,3],"user":"u","priority":2,"encoding_format":"float"}',
]

SCORE_BODIES = [
    b'{"text_1":"q","text_2":["a","bc"],"truncate_prompt_tokens":4}',
    b'{"text_1":["a","b"],"text_2":["c","d"],"model":"fuzz-model"}',
]

MESSAGES_BODIES = [
    b'{"model":"fuzz-model","max_tokens":8,"system":"S","messages":[{"role":"user",'
    b'"content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"ok"}],'
    b'"stop_sequences":["x"],"temperature":0.5,"stream":true,"metadata":{"user_id":"u"}}',
    b'{"max_tokens":4,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}],'
    b'"thinking":{"type":"disabled"},"tools":[]}',
    b'{"max_tokens":4,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":'
    b'{"type":"any"},"messages":[{"role":"user","content":"q"},{"role":"assistant","content":'
    b'[{"type":"tool_use","id":"t","name":"f","input":{"a":1}}]},{"role":"user","content":'
    b'[{"type":"tool_result","tool_use_id":"t","content":"1","is_error":true}]}]}',
]

RESPONSES_BODIES = [
    b'{"model":"fuzz-model","input":"hi","instructions":"S","max_output_tokens":8,'
    b'"temperature":0.5,"stream":true,"store":true,"metadata":{"k":"v"}}',
    b'{"input":[{"role":"user","content":[{"type":"input_text","text":"a"}]},{"type":'
    b'"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output",'
    b'"call_id":"c","output":"1"}],"tools":[{"type":"function","name":"f","parameters":{}}],'
    b'"previous_response_id":"resp_a","text":{"format":{"type":"json_object"}}}',
]

RERANK_BODIES = [
    b'{"query":"q","documents":["a",{"text":"bc"}],"top_n":1,"return_documents":false}',
    b'{"query":"","texts":["x","y"],"return_text":true,"truncate_prompt_tokens":3}',
    b'{"query":"q","documents":[],"texts":["z"]}',
]


def request_seeds(out):
    """corpus/request/: bodies behind the option byte of fuzz_request.c
    (low 2 bits: completions, chat, tokenize, detokenize; bits 2-5: chat
    template; bit 6: a tokenizer; bit 7 with 0: embeddings, with 1: rerank,
    bit 2 then: a rerank template, bit 3: /v1/score; 2 and 3 with bit 7: a
    Messages body, 3 count_tokens's; 2 with bits 7 and 3: a Responses body,
    stored with bit 2)."""
    os.makedirs(out, exist_ok=True)
    i = 0
    for op, bodies in ((0, COMPLETION_BODIES), (1, CHAT_BODIES), (2, SMALL_BODIES),
                       (3, SMALL_BODIES), (128, EMBED_BODIES), (129, RERANK_BODIES),
                       (130, MESSAGES_BODIES), (131, MESSAGES_BODIES), (137, SCORE_BODIES),
                       (138, RESPONSES_BODIES)):
        for b in bodies:
            for tmpl in ((1, 3, 6) if op in (1, 130) else (1,) if op == 131 else
                         (0, 1) if op in (129, 137, 138) else (0,)):
                opt = op | (tmpl << 2) | 64
                write(os.path.join(out, "req-%03d" % i), bytes([opt]) + b)
                i += 1


def http_req(method, path, body=b"", headers=(), version=b"1.1"):
    h = b"%s %s HTTP/%s\r\nHost: x\r\n" % (method, path, version)
    for k, v in headers:
        h += b"%s: %s\r\n" % (k, v)
    if body or method == b"POST":
        h += b"Content-Length: %d\r\n" % len(body)
    return h + b"\r\n" + body


def http_seeds(out):
    """corpus/http/: what a client sends, behind the option byte of
    fuzz_http.c (bits 0-2: how the bytes are cut into writes; bit 3:
    half-close after sending)."""
    os.makedirs(out, exist_ok=True)
    body = b'{"prompt":[1,2,3],"max_tokens":4}'
    streams = {
        "get": http_req(b"GET", b"/health"),
        "post-echo": http_req(b"POST", b"/v1/completions", body),
        "stream": http_req(b"POST", b"/s", body),
        "held": http_req(b"POST", b"/h", body),
        "fail": http_req(b"POST", b"/f", body),
        "fail-before-headers": http_req(b"GET", b"/c"),
        "error": http_req(b"GET", b"/e?x=1#y"),
        "pipelined": http_req(b"GET", b"/s") + http_req(b"POST", b"/x", body)
        + http_req(b"GET", b"/h") + http_req(b"GET", b"/e"),
        "keepalive-close": http_req(b"GET", b"/a", headers=((b"Connection", b"keep-alive"),))
        + http_req(b"GET", b"/b", headers=((b"Connection", b"close"),)),
        "http10-stream": http_req(b"POST", b"/s", body, version=b"1.0"),
        "http10-keepalive": http_req(b"GET", b"/a", version=b"1.0",
                                     headers=((b"Connection", b"keep-alive"),)),
        "expect": http_req(b"POST", b"/h", body, headers=((b"Expect", b"100-continue"),)),
        "expect-other": http_req(b"POST", b"/h", body, headers=((b"Expect", b"nothing"),)),
        "chunked": b"POST /s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
        "header-space": b"GET / HTTP/1.1\r\nBad Header: x\r\n\r\n",
        "auth": http_req(b"GET", b"/a", headers=((b"Authorization", b"Bearer k"),)),
        "too-large": http_req(b"POST", b"/x", b"x" * 5000),
        "half-request": b"POST /h HTTP/1.1\r\nContent-Length: 100\r\n\r\nabc",
        "head": http_req(b"HEAD", b"/x"),
        "garbage": b"\x00\xff GET\r\n\r\n",
    }
    for name, data in sorted(streams.items()):
        for opt in (4, 8 | 4, 0, 8 | 3):
            write(os.path.join(out, "%s-%d" % (name, opt)), bytes([opt]) + data)


if __name__ == "__main__":
    gguf_seeds(os.path.join(HERE, "corpus", "gguf"))
    tokenizer_seeds(os.path.join(HERE, "corpus", "tokenizer"))
    request_seeds(os.path.join(HERE, "corpus", "request"))
    http_seeds(os.path.join(HERE, "corpus", "http"))
