// tests/integration/openai_chat.mjs — the official `openai` SDK (v6)
// chat.completions.create against the real foliod over its Unix socket:
// non-streamed and streamed (same seed -> same text), usage, roles, a
// bad role as BadRequestError; chat logprobs + top_logprobs (greedy: the
// chosen token is the top one; streamed == non-streamed; the tokens spell
// the text); models.retrieve; n = 3 with usage counting the prompt once.
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
// chat logprobs, OpenAI's format, through the SDK's types
const lreq = { model, messages, max_tokens: 8, temperature: 0, ignore_eos: true, logprobs: true, top_logprobs: 3 };
const lc = await client.chat.completions.create(lreq);
const lp = lc.choices[0].logprobs?.content;
if (!Array.isArray(lp) || lp.length !== 8) fail('chat logprobs: ' + JSON.stringify(lc.choices[0]));
for (const e of lp) {
  if (typeof e.token !== 'string' || !(e.logprob <= 0) || !Array.isArray(e.bytes) || e.top_logprobs.length !== 3)
    fail('logprob entry: ' + JSON.stringify(e));
  const tops = e.top_logprobs.map((t) => t.logprob);
  if (tops.some((x, i) => i && x > tops[i - 1])) fail('top_logprobs not descending: ' + JSON.stringify(e));
  if (e.top_logprobs[0].token !== e.token || Math.abs(e.top_logprobs[0].logprob - e.logprob) > 1e-4)
    fail('greedy token is not the top one: ' + JSON.stringify(e));
}
const bytes = lp.flatMap((e) => e.bytes);
if (Buffer.from(bytes).toString('utf8') !== lc.choices[0].message.content) fail('logprob bytes do not spell the text');
const ls = await client.chat.completions.create({ ...lreq, stream: true });
const slp = [];
for await (const ch of ls) for (const x of ch.choices) if (x.logprobs?.content) slp.push(...x.logprobs.content);
if (JSON.stringify(slp.map((e) => [e.token, e.logprob])) !== JSON.stringify(lp.map((e) => [e.token, e.logprob])))
  fail('streamed chat logprobs differ');
const mr = await client.models.retrieve(model);
if (mr.id !== model || mr.object !== 'model') fail('models.retrieve: ' + JSON.stringify(mr));
const n3 = await client.chat.completions.create({ model, messages, max_tokens: 5, n: 3, temperature: 1, seed: 2 });
if (n3.choices.length !== 3 || n3.usage.prompt_tokens !== c.usage.prompt_tokens || n3.usage.completion_tokens > 15)
  fail('n=3 usage: ' + JSON.stringify(n3.usage));
console.log('ok - openai SDK: chat logprobs + top_logprobs (stream too), models.retrieve, n=3 usage counts the prompt once');
console.log(`ok - openai SDK: chat.completions.create, streamed (${chunks} chunks, same text), usage, bad role as BadRequestError`);
await dispatcher.close();
