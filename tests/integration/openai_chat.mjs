// tests/integration/openai_chat.mjs — the official `openai` SDK (v6)
// chat.completions.create against the real foliod over its Unix socket:
// non-streamed and streamed (same seed -> same text), usage, roles, and a
// bad role as BadRequestError.
// Usage: node openai_chat.mjs SOCKET  (run from a dir with node_modules)
import OpenAI from 'openai';
import { Agent, fetch } from 'undici';

const sock = process.argv[2];
const fail = (m) => { console.error('FAIL: ' + m); process.exit(1); };
const dispatcher = new Agent({ connect: { socketPath: sock } });
const client = new OpenAI({
  apiKey: 'unused', baseURL: 'http://localhost/v1', fetch, fetchOptions: { dispatcher }, maxRetries: 0,
});

const model = (await client.models.list()).data[0].id;
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say something.' },
];
const req = { model, messages, max_tokens: 10, temperature: 0.7, seed: 7, ignore_eos: true };
const c = await client.chat.completions.create(req);
const m = c.choices[0].message;
if (c.object !== 'chat.completion' || m.role !== 'assistant' || typeof m.content !== 'string' || m.content.length === 0)
  fail('chat completion: ' + JSON.stringify(c));
if (c.choices[0].finish_reason !== 'length' || c.usage.completion_tokens !== 10 ||
    c.usage.total_tokens !== c.usage.prompt_tokens + 10)
  fail('chat usage/finish: ' + JSON.stringify(c));
const stream = await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } });
let text = '', role = null, finish = null, usage = null, chunks = 0;
for await (const ch of stream) {
  chunks++;
  if (ch.object !== 'chat.completion.chunk') fail('chunk object: ' + JSON.stringify(ch));
  if (ch.usage) usage = ch.usage;
  for (const x of ch.choices) {
    if (x.delta.role) role = x.delta.role;
    if (x.delta.content) text += x.delta.content;
    if (x.finish_reason) finish = x.finish_reason;
  }
}
if (text !== m.content) fail(`streamed chat text differs: ${JSON.stringify(text)} vs ${JSON.stringify(m.content)}`);
if (role !== 'assistant' || finish !== 'length') fail(`stream role/finish: ${role} ${finish}`);
if (!usage || usage.completion_tokens !== 10 || usage.prompt_tokens !== c.usage.prompt_tokens) fail('stream usage: ' + JSON.stringify(usage));
try {
  await client.chat.completions.create({ model, messages: [{ role: 'wizard', content: 'x' }] });
  fail('bad role accepted');
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.status !== 400) fail('error type: ' + e);
}
console.log(`ok - openai SDK: chat.completions.create, streamed (${chunks} chunks, same text), usage, bad role as BadRequestError`);
await dispatcher.close();
