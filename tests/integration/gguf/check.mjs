// tests/integration/gguf/check.mjs — parse a `folio gen-model --preset tiny`
// file with @huggingface/gguf (an independent GGUF reader) and check its
// architecture, hyperparameters, vocabulary, tensor names, shapes, types and
// data layout.  Usage: node check.mjs FILE.gguf f32|f16 [VOCAB_SIZE (32000)]
import { gguf } from '@huggingface/gguf';
import { statSync } from 'node:fs';

const [file, dtype, nVocab] = process.argv.slice(2);
const r = await gguf(file, { allowLocalFile: true, computeParametersCount: true });
const md = r.metadata;
let failures = 0;
function check(what, got, want) {
  const g = typeof got === 'bigint' ? Number(got) : got;
  if (g !== want) {
    console.error(`FAIL ${what}: got ${g}, want ${want}`);
    failures++;
  }
}

const dim = 512, nLayers = 8, nHeads = 8, nKv = 2, hd = 64, ffn = 1376, vocab = Number(nVocab ?? 32000);
check('version', md.version, 3);
check('general.architecture', md['general.architecture'], 'llama');
check('general.alignment', md['general.alignment'], 32);
check('general.file_type', md['general.file_type'], dtype === 'f16' ? 1 : 0);
check('llama.context_length', md['llama.context_length'], 2048);
check('llama.embedding_length', md['llama.embedding_length'], dim);
check('llama.block_count', md['llama.block_count'], nLayers);
check('llama.feed_forward_length', md['llama.feed_forward_length'], ffn);
check('llama.attention.head_count', md['llama.attention.head_count'], nHeads);
check('llama.attention.head_count_kv', md['llama.attention.head_count_kv'], nKv);
check('llama.rope.dimension_count', md['llama.rope.dimension_count'], hd);
check('llama.rope.freq_base', md['llama.rope.freq_base'], 10000);
check('tokenizer.ggml.model', md['tokenizer.ggml.model'], 'llama');
check('tokenizer.ggml.tokens length', md['tokenizer.ggml.tokens'].length, vocab);
check('tokenizer.ggml.scores length', md['tokenizer.ggml.scores'].length, vocab);
check('tokenizer.ggml.token_type length', md['tokenizer.ggml.token_type'].length, vocab);
check('token 1', md['tokenizer.ggml.tokens'][1], '<s>');
check('token 3', md['tokenizer.ggml.tokens'][3], '<0x00>');
check('tokenizer.ggml.bos_token_id', md['tokenizer.ggml.bos_token_id'], 1);
check('tokenizer.ggml.eos_token_id', md['tokenizer.ggml.eos_token_id'], 2);
check('tokenizer.ggml.add_bos_token', md['tokenizer.ggml.add_bos_token'], true);

const want = [['token_embd.weight', [dim, vocab], true]];
for (let l = 0; l < nLayers; l++) {
  want.push([`blk.${l}.attn_norm.weight`, [dim], false]);
  want.push([`blk.${l}.attn_q.weight`, [dim, nHeads * hd], true]);
  want.push([`blk.${l}.attn_k.weight`, [dim, nKv * hd], true]);
  want.push([`blk.${l}.attn_v.weight`, [dim, nKv * hd], true]);
  want.push([`blk.${l}.attn_output.weight`, [nHeads * hd, dim], true]);
  want.push([`blk.${l}.ffn_norm.weight`, [dim], false]);
  want.push([`blk.${l}.ffn_gate.weight`, [dim, ffn], true]);
  want.push([`blk.${l}.ffn_up.weight`, [dim, ffn], true]);
  want.push([`blk.${l}.ffn_down.weight`, [ffn, dim], true]);
}
want.push(['output_norm.weight', [dim], false]);
want.push(['output.weight', [dim, vocab], true]);

check('tensor_count', md.tensor_count, want.length);
check('tensorInfos.length', r.tensorInfos.length, want.length);
check('tensor data offset alignment', Number(r.tensorDataOffset) % 32, 0);
let params = 0, end = 0;
want.forEach(([name, shape, matrix], i) => {
  const t = r.tensorInfos[i];
  if (!t) return;
  check(`tensor ${i} name`, t.name, name);
  check(`${name} n_dims`, t.n_dims, shape.length);
  check(`${name} shape`, t.shape.map(Number).join(','), shape.join(','));
  const type = matrix && dtype === 'f16' ? 1 : 0;
  check(`${name} dtype`, t.dtype, type);
  check(`${name} offset alignment`, Number(t.offset) % 32, 0);
  const n = shape.reduce((a, b) => a * b, 1);
  params += n;
  end = Math.max(end, Number(t.offset) + n * (type === 1 ? 2 : 4));
});
check('parameterCount', r.parameterCount, params);
check('file size', statSync(file).size, Number(r.tensorDataOffset) + end);

if (failures) {
  console.error(`${file}: ${failures} check(s) failed`);
  process.exit(1);
}
console.log(`${file}: @huggingface/gguf agrees (${r.tensorInfos.length} tensors, ${params} parameters, ${dtype})`);
