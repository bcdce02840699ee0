#!/usr/bin/env bash
# tests/integration/llamacpp/run.sh FOLIO_BIN WORKDIR
#
# Logit agreement with llama.cpp on the same GGUF file, per weight type
# and architecture (llama, qwen2, qwen3) and RoPE scaling:
# generates a tiny model with `folio gen-model --dtype` (F32, F16, BF16,
# Q8_0) and `folio quantize` (Q4_K_M, Q6_K, Q4_0, Q5_K_M, Q4_1, Q5_0, Q5_1,
# Q3_K_M, Q2_K, IQ4_NL, IQ4_XS from the F32 file),
# then compare_logits.mjs evaluates each in llama.cpp (node-llama-cpp's
# prebuilt CPU library, installed from npm into WORKDIR) and in `folio eval`:
# max |dlogit| on the top 10 within the type's bound, greedy 32-token
# continuation identical except at near-ties; and two LoRA adapters
# (`folio gen-lora`) applied by both.  llama.cpp loading each file
# is itself the check that it reads what foliod writes.
#
# Bounds.  Both sides read the same quantized weights, so weight rounding
# cancels; what differs is the arithmetic: llama.cpp multiplies F16/BF16
# weights with activations rounded to 16 bits (5e-2), and quantizes the
# activations of Q8_0 / Q4_0 / Q5_0 / IQ4_NL products to Q8_0 blocks of 32 and of
# Q4_1 / Q5_1 ones to Q8_1 (1e-1; Q4_1 2e-1: its logits differ by up to
# 7e-2, and a greedy step whose top-2 margin was 0.13 parted, which two
# logits each 7e-2 off can do), and of
# K-quant products to Q8_K blocks of 256, whose step is set by the largest
# of 256 values rather than 32: the rounding noise is larger (seen on tiny:
# Q8_0 6-7e-2, Q4_K_M 8-9e-2, Q6_K up to 1.3e-1), hence 2e-1.  foliod's
# int8 products (model/quant.c) quantize activations the same way, to
# Q8_0 / Q8_1 / Q8_K blocks (Q8_0 blocks with their code sums for Q4_0 and
# Q5_0).
# Exit 77 (skip) when npm cannot install node-llama-cpp.
set -euo pipefail
folio=$(realpath "$1")
work=$2
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cd "$work"

if [ ! -d node_modules/node-llama-cpp ] || [ ! -d node_modules/@node-llama-cpp/linux-x64 ]; then
  [ -f package.json ] || echo '{"name":"folio-llamacpp-check","private":true}' > package.json
  if ! timeout 600 npm install --no-audit --no-fund --omit=optional --ignore-scripts \
      node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 > npm.log 2>&1; then
    echo "SKIP: npm could not install node-llama-cpp (see $work/npm.log)"
    exit 77
  fi
fi
cp "$here/compare_logits.mjs" .
# The files have a synthetic vocabulary of 8192 tokens, not 32000: the
# embedding and output matrices were most of each file (CI time).
# Every file is made first; then one node process compares them all (cases
# are LABEL|FILE|TOLERANCE|PROMPTS).  F32 on all six prompts; the other
# types on fewer (CI time): a short one and a random one, Q4_0, Q5_K_M and
# the other 32-blocks (same kernels' formats as Q8_0 / Q4_K, Q4_0) on the
# short one.
"$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 -o tiny-f32.gguf
cases=("F32|$work/tiny-f32.gguf|1e-3|${PROMPTS:-6}")
for dt in f16 bf16 q8_0; do
  "$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 --dtype $dt -o tiny-$dt.gguf
done
for q in q4_k_m q6_k q4_0 q5_k_m q4_1 q5_0 q5_1 q3_k_m q2_k iq4_nl iq4_xs; do
  "$folio" quantize tiny-f32.gguf tiny-$q.gguf --type $q | tee quantize-$q.txt
done
# tiny has 8 layers with ffn rows of 1376 (not a multiple of 256): Q4_K_M
# gives Q6_K to output and to attn_v of layers 0, 3, 6, 7 (llama.cpp's
# "more bits" layers), ffn_down of those layers falls back from Q6_K to
# Q8_0 and of the other four from Q4_K to Q5_0; norms stay F32.
grep -q "F32 x 17 Q5_0 x 4 Q8_0 x 4 Q4_K x 45 Q6_K x 5" quantize-q4_k_m.txt ||
  { echo "FAIL: q4_k_m mix differs"; exit 1; }
for spec in f16:5e-2:2 bf16:5e-2:2 q8_0:1e-1:2 q4_k_m:2e-1:2 q6_k:2e-1:2 q4_0:1e-1:1 \
    q5_k_m:2e-1:1 q4_1:2e-1:1 q5_0:1e-1:1 q5_1:1e-1:1 q3_k_m:2e-1:1 q2_k:2e-1:1 \
    iq4_nl:1e-1:1 iq4_xs:2e-1:1; do
  IFS=: read -r t tol np <<< "$spec"
  cases+=("${t^^}|$work/tiny-$t.gguf|$tol|${PROMPTS:-$np}")
done
# The other architectures: qwen2 (Q/K/V biases, NeoX RoPE, output tied to
# the embedding) and qwen3 (per-head Q/K RMSNorm, NeoX RoPE), as F32, Q8_0
# and Q4_K_M (their Q4_K_M has attn_v and the output in Q6_K: Q, K and V
# run as separate products, and Q6_K's kernels are in it, as in llama's
# Q6_K file); the bounds are the llama ones, for the same reasons.
# qwen3's Q8_0 file has ffn_up in F16 (gate and up of differing types: two
# products, each in its type).
for arch in qwen2 qwen3; do
  "$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 --arch $arch -o $arch-f32.gguf
  up=(); [ $arch = qwen3 ] && up=(--up-dtype f16)
  "$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 --arch $arch --dtype q8_0 "${up[@]}" -o $arch-q8_0.gguf
  "$folio" quantize $arch-f32.gguf $arch-q4_k_m.gguf --type q4_k_m > /dev/null
  for spec in f32:1e-3:1 q8_0:1e-1:1 q4_k_m:2e-1:1; do
    IFS=: read -r t tol np <<< "$spec"
    cases+=("$arch ${t^^}|$work/$arch-$t.gguf|$tol|${PROMPTS:-$np}")
  done
done
# RoPE scaling read from the file: linear (factor 4), YaRN (factor 4 over
# an original context of 512) and llama3 (factor 8 over 64, low/high
# frequency factors 1 and 4: written as rope_freqs.weight, the per-dimension
# divisors llama.cpp applies), F32.
for rs in linear:4 yarn:4:512 llama3:8:64; do
  "$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 --rope-scaling $rs -o rope-${rs%%:*}.gguf
  cases+=("F32, rope scaling $rs|$work/rope-${rs%%:*}.gguf|1e-3|${PROMPTS:-1}")
done
# A reranker (qwen3 with a yes/no classification head, pooling type rank):
# its relevance score as llama.cpp's rank pooling gives it (compare_logits.mjs).
"$folio" gen-model --preset tiny --seed 7 --vocab-size 8192 --arch qwen3 --reranker -o qwen3-rerank.gguf
cases+=("qwen3 F32 reranker|$work/qwen3-rerank.gguf|1e-3|${PROMPTS:-1}")
# LoRA adapters (`folio gen-lora`, llama.cpp's adapter format) on the F32
# and Q8_0 files: one of every matrix (F32, rank 8, alpha 16) at scale 1,
# one of Q, V and down (F16, rank 8, no alpha) at scale 0.5.  llama.cpp
# rounds activations to 16 bits for an F16 adapter's products, hence the
# F16 adapter on the Q8_0 file (whose bound covers it).
"$folio" gen-lora --model tiny-f32.gguf --seed 11 --rank 8 --alpha 16 -o lora-f32.gguf
"$folio" gen-lora --model tiny-f32.gguf --seed 12 --rank 8 --alpha 0 --targets q,v,down \
  --dtype f16 -o lora-f16.gguf
cases+=("F32 + LoRA (F32, all matrices)|$work/tiny-f32.gguf|1e-3|${PROMPTS:-2}|$work/lora-f32.gguf:1")
cases+=("Q8_0 + LoRA (F16, q/v/down, scale 0.5)|$work/tiny-q8_0.gguf|1e-1|${PROMPTS:-1}|$work/lora-f16.gguf:0.5")
status=0
node compare_logits.mjs "$folio" "${cases[@]}" || status=$?
rm -f ./*.gguf
exit $status
