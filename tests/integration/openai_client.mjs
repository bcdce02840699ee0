// tests/integration/openai_client.mjs — the official `openai` SDK (v6)
// talks to foliod over its Unix socket through an undici Agent.
// Usage: node openai_client.mjs SOCKET  (run from a dir with node_modules)
import OpenAI from 'openai';
import { Agent, fetch } from 'undici';

const sock = process.argv[2];
const fail = (m) => { console.error('FAIL: ' + m); process.exit(1); };
const dispatcher = new Agent({ connect: { socketPath: sock } });
const client = new OpenAI({
  apiKey: 'unused', baseURL: 'http://localhost/v1', fetch, fetchOptions: { dispatcher }, maxRetries: 0,
});

const models = await client.models.list();
const model = models.data[0].id;
const c = await client.completions.create({ model, prompt: [1, 2, 3, 4], max_tokens: 12, temperature: 0, ignore_eos: true });
if (c.choices.length !== 1 || c.usage.completion_tokens !== 12 || c.choices[0].finish_reason !== 'length')
  fail('completion: ' + JSON.stringify(c));
const stream = await client.completions.create({
  model, prompt: [1, 2, 3, 4], max_tokens: 12, temperature: 0, ignore_eos: true, stream: true, stream_options: { include_usage: true },
});
let text = '', chunks = 0, usage = null, finish = null;
for await (const ch of stream) {
  chunks++;
  if (ch.usage) usage = ch.usage;
  for (const x of ch.choices) { text += x.text; if (x.finish_reason) finish = x.finish_reason; }
}
if (text !== c.choices[0].text) fail(`streamed text differs: ${JSON.stringify(text)} vs ${JSON.stringify(c.choices[0].text)}`);
if (!usage || usage.completion_tokens !== 12 || finish !== 'length') fail('stream usage/finish');
try {
  await client.completions.create({ model, prompt: [1], max_tokens: -3 });
  fail('negative max_tokens accepted');
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.status !== 400) fail('error type: ' + e);
}
// embeddings: the SDK asks for base64 unless told (and decodes it); the
// same vectors as encoding_format "float"
const e64 = await client.embeddings.create({ model, input: [[1, 2, 3], [4, 5]] });
const ef = await client.embeddings.create({ model, input: [[1, 2, 3], [4, 5]], encoding_format: 'float' });
if (e64.data.length !== 2 || e64.usage.prompt_tokens !== 5 || e64.data[1].index !== 1)
  fail('embeddings: ' + JSON.stringify(e64));
for (let i = 0; i < 2; i++) {
  const a = e64.data[i].embedding, b = ef.data[i].embedding;
  if (a.length !== b.length || a.length === 0 || a.some((x, k) => Math.fround(b[k]) !== x))
    fail(`embedding ${i}: base64 ${JSON.stringify(a)} vs float ${JSON.stringify(b)}`);
}
console.log(`ok - openai SDK: models.list, completion, streamed completion (${chunks} chunks, same text), 400 as BadRequestError, embeddings (base64 = float)`);
await dispatcher.close();
