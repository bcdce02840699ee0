// tests/integration/responses_client.mjs — the official `openai` SDK (v6)
// client.responses against the real foliod over its Unix socket (an undici
// Agent, as openai_client.mjs):
//   - responses.create: output_text (the SDK's sum of the output) is the
//     text curl got (the response in RESPONSE_JSON, same body), the same
//     status and usage;
//   - create with stream: true: the events in order, sequence_number
//     0, 1, .., the deltas the same text, last response.completed or
//     response.incomplete; responses.stream (the SDK's accumulator, which
//     throws on an event out of place): finalResponse().output_text the same;
//   - retrieve = the create's response; the output items sent back as input
//     = previous_response_id (whose inputItems.list is its own input);
//     delete, then retrieve is a NotFoundError;
//   - a function tool round trip (tool_choice required, function_call_output
//     sent back by items and by previous_response_id); parse with a
//     json_schema text.format; background: create, retrieve until done (the
//     foreground's text), cancel; a refusal as BadRequestError naming its param.
// Usage: node responses_client.mjs SOCKET RESPONSE_JSON  (from a dir with node_modules)
import OpenAI from 'openai';
import { Agent, fetch } from 'undici';
import { readFileSync } from 'node:fs';
import { isDeepStrictEqual } from 'node:util';

const [sock, file] = process.argv.slice(2);
const want = JSON.parse(readFileSync(file, 'utf8'));
const fail = (m) => { console.error('FAIL: ' + m); process.exit(1); };
const show = (x) => JSON.stringify(x);
const dispatcher = new Agent({ connect: { socketPath: sock } });
const client = new OpenAI({
  apiKey: 'unused', baseURL: 'http://localhost/v1', fetch, fetchOptions: { dispatcher }, maxRetries: 0,
});
const model = (await client.models.list()).data[0].id;
const text = want.output[0].content[0].text;

// create, as curl did
const body = { model, input: 'Hello there', instructions: 'Be brief.', max_output_tokens: 16, temperature: 0 };
const r = await client.responses.create(body);
if (r.object !== 'response' || !r.id.startsWith('resp_') || r.output_text !== text || r.status !== want.status ||
    r.usage.input_tokens !== want.usage.input_tokens || r.usage.output_tokens !== want.usage.output_tokens)
  fail(`create: ${show(r)} vs curl's ${show(want)}`);

// streamed: raw events, then the SDK's accumulating helper
const stream = await client.responses.create({ ...body, stream: true });
let deltas = '', n = 0, last = null;
for await (const ev of stream) {
  if (ev.sequence_number !== n++) fail(`event ${n - 1}: sequence_number ${ev.sequence_number}`);
  if (n === 1 && ev.type !== 'response.created') fail('first event: ' + ev.type);
  if (ev.type === 'response.output_text.delta') deltas += ev.delta;
  last = ev;
}
if (deltas !== text) fail(`streamed text ${show(deltas)} vs ${show(text)}`);
if (last.type !== `response.${r.status}` || last.response.output[0].content[0].text !== text)
  fail('last event: ' + show(last));
const helper = client.responses.stream(body);
let ndelta = 0;
helper.on('response.output_text.delta', () => ndelta++);
const fin = await helper.finalResponse();
if (fin.output_text !== text || fin.status !== r.status || ndelta === 0) fail(`responses.stream: ${show(fin)} (${ndelta} deltas)`);

// retrieve; the output items sent back = previous_response_id; delete
const got = await client.responses.retrieve(r.id);
if (!isDeepStrictEqual(got, r)) fail(`retrieve: ${show(got)} vs ${show(r)}`);
const more = { model, max_output_tokens: 8, temperature: 0 };
const byItems = await client.responses.create({
  ...more, input: [{ role: 'user', content: 'Hello there' }, ...r.output, { role: 'user', content: 'And then?' }],
});
const byPrev = await client.responses.create({ ...more, input: 'And then?', previous_response_id: r.id });
if (byItems.output_text !== byPrev.output_text || byItems.usage.input_tokens !== byPrev.usage.input_tokens ||
    byPrev.previous_response_id !== r.id)
  fail(`the output sent back: ${show(byItems)} vs previous_response_id: ${show(byPrev)}`);
const listed = [];
for await (const item of client.responses.inputItems.list(byPrev.id, { limit: 1, order: 'asc' })) listed.push(item);
if (listed.length !== 1 || listed[0].type !== 'message' || listed[0].content[0].text !== 'And then?')
  fail(`inputItems.list: ${show(listed)}`);
await client.responses.delete(r.id);
try {
  await client.responses.retrieve(r.id);
  fail('retrieve after delete answered');
} catch (e) {
  if (!(e instanceof OpenAI.NotFoundError)) fail('retrieve after delete: ' + e);
}

// a function tool round trip
const tools = [{
  type: 'function', name: 'get_weather', description: 'The weather', strict: true,
  parameters: { type: 'object', properties: { unit: { enum: ['c', 'f'] } }, required: ['unit'], additionalProperties: false },
}];
const q = { role: 'user', content: 'Weather in Paris?' };
const t = await client.responses.create({ model, input: [q], tools, tool_choice: 'required', max_output_tokens: 64, temperature: 0 });
const call = t.output.find((o) => o.type === 'function_call');
if (t.status !== 'completed' || !call || call.name !== 'get_weather' || !['c', 'f'].includes(JSON.parse(call.arguments).unit))
  fail('tool call: ' + show(t));
const result = { type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' };
const t2 = await client.responses.create({ model, input: [q, ...t.output, result], tools, max_output_tokens: 8, temperature: 0 });
const t3 = await client.responses.create({ model, previous_response_id: t.id, input: [result], tools, max_output_tokens: 8, temperature: 0 });
if (t2.output[0]?.type !== 'message' || typeof t2.output_text !== 'string' || t3.output_text !== t2.output_text)
  fail(`function_call_output: ${show(t2)} / by previous_response_id ${show(t3)}`);

// structured output: parse with a json_schema text.format
const p = await client.responses.parse({
  model, input: 'Pick', max_output_tokens: 24, temperature: 0,
  text: { format: { type: 'json_schema', name: 'pick', strict: true, schema: tools[0].parameters } },
});
if (!p.output_parsed || !['c', 'f'].includes(p.output_parsed.unit)) fail('parse: ' + show(p));

// background: queued at once, polled with retrieve until it ends: the text
// of the same request answered in the foreground; a long one cancelled
const bg = await client.responses.create({ ...body, background: true });
if (bg.status !== 'queued' || bg.background !== true || bg.output.length) fail('background: ' + show(bg));
let done = bg;
for (let k = 0; k < 600 && ['queued', 'in_progress'].includes(done.status); k++) {
  await new Promise((ok) => setTimeout(ok, 50));
  done = await client.responses.retrieve(bg.id);
}
if (done.status !== want.status || done.output_text !== r.output_text || done.background !== true)
  fail(`background: ${show(done)} / ${show(r)}`);
const long = await client.responses.create({
  model, input: 'Tell a long story', max_output_tokens: 1500, ignore_eos: true, background: true,
});
const c = await client.responses.cancel(long.id);
const c2 = await client.responses.retrieve(long.id);
if (c.status !== 'cancelled' || c2.status !== 'cancelled' || c2.usage?.output_tokens >= 1500)
  fail(`cancel: ${show(c)} / ${show(c2)}`);
try {
  await client.responses.create({ model, input: 'a', background: true, stream: true });
  fail('background stream accepted');
} catch (e) {
  if (!(e instanceof OpenAI.BadRequestError) || e.param !== 'background') fail('background stream: ' + e);
}
console.log(`ok - openai SDK: responses.create (output_text = curl's), stream (${n} events) and responses.stream, ` +
  `retrieve, output items sent back = previous_response_id, delete, tool round trip (${call.arguments}), ` +
  `parse ${show(p.output_parsed)}, background polled (${done.status}) and cancelled, BadRequestError`);
await dispatcher.close();
