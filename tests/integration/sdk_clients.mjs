// tests/integration/sdk_clients.mjs — the three npm client stacks a new
// user reaches for, against foliod serving a synthetic model (random
// text: constrained decoding is what makes structured answers valid):
//   openai (v6)                          completions, chat, streaming, chat
//                                        logprobs, json_schema, tools + required,
//                                        round trip
//   ai (v5) + @ai-sdk/openai-compatible  generateText, streamText,
//                                        generateObject (nested zod schema),
//                                        tools + toolChoice required, round trip
//   @langchain/openai                    invoke, stream, chat logprobs,
//                                        withStructuredOutput
//                                        (jsonSchema and functionCalling),
//                                        bindTools + tool_choice required, round trip
// Usage: node sdk_clients.mjs BASE_URL [SOCKET]  (no SOCKET: plain TCP)
import OpenAI from 'openai';
import { Agent, fetch as ufetch } from 'undici';
import { generateText, streamText, generateObject, tool, stepCountIs } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import { ChatOpenAI, OpenAI as LCOpenAI } from '@langchain/openai';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool as lcTool } from '@langchain/core/tools';
import Ajv from 'ajv';
import { z } from 'zod';
import { zodToJsonSchema } from 'zod-to-json-schema';

const [base, sock] = process.argv.slice(2);
const via = sock ? 'socket' : 'tcp';
const fail = (m) => { console.error(`FAIL (${via}): ${m}`); process.exit(1); };
const dispatcher = sock ? new Agent({ connect: { socketPath: sock } }) : new Agent();
const fetch = (url, init) => ufetch(url, { ...init, dispatcher });
const ajv = new Ajv({ strict: false });

const Person = z.object({
  name: z.string().max(12),
  age: z.number().int(),
  address: z.object({ city: z.string().max(10), zip: z.string().max(6) }),
  tags: z.array(z.string().max(5)).max(2),
  role: z.enum(['admin', 'user']),
});
const personSchema = zodToJsonSchema(Person);
const checkPerson = (o, what) => {
  const r = Person.safeParse(o);
  if (!r.success) fail(`${what}: ${JSON.stringify(o)} does not fit the schema: ${r.error}`);
};
const weatherParams = z.object({ city: z.string().max(12), unit: z.enum(['c', 'f']) });
const addParams = z.object({ a: z.number().int(), b: z.number().int() });
const checkCall = (name, args, what) => {
  const p = name === 'get_weather' ? weatherParams : name === 'add' ? addParams : null;
  if (!p) fail(`${what}: unknown tool ${name}`);
  const r = p.safeParse(typeof args === 'string' ? JSON.parse(args) : args);
  if (!r.success) fail(`${what}: ${name}(${JSON.stringify(args)}) invalid: ${r.error}`);
};
const log = [];

// ---- openai ----------------------------------------------------------
{
  const client = new OpenAI({ apiKey: 'k', baseURL: base, fetch, maxRetries: 0 });
  const model = (await client.models.list()).data[0].id;
  const c = await client.completions.create({ model, prompt: 'Hello', max_tokens: 8 });
  if (!c.choices[0] || typeof c.choices[0].text !== 'string') fail('openai completion');
  const ch = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8 });
  if (ch.choices[0].message.role !== 'assistant') fail('openai chat');
  let text = '';
  const st = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 8, stream: true });
  for await (const x of st) text += x.choices[0]?.delta?.content ?? '';
  // chat logprobs: one entry per token, each with its top alternatives
  const lpc = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 6, ignore_eos: true,
    logprobs: true, top_logprobs: 3,
  });
  const lpe = lpc.choices[0].logprobs?.content;
  if (!Array.isArray(lpe) || lpe.length !== 6 ||
      lpe.some((e) => typeof e.logprob !== 'number' || e.logprob > 0 || e.top_logprobs.length !== 3))
    fail('openai chat logprobs: ' + JSON.stringify(lpc.choices[0].logprobs));
  const js = await client.chat.completions.create({
    model, messages: [{ role: 'user', content: 'a person' }], max_tokens: 120,
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: personSchema } },
  });
  checkPerson(JSON.parse(js.choices[0].message.content), 'openai json_schema');
  const tools = [
    { type: 'function', function: { name: 'get_weather', description: 'weather in a city', parameters: zodToJsonSchema(weatherParams) } },
    { type: 'function', function: { name: 'add', description: 'a + b', parameters: zodToJsonSchema(addParams) } },
  ];
  const messages = [{ role: 'developer', content: 'use tools' }, { role: 'user', content: 'weather in Paris, and 2+3?' }];
  const tc = await client.chat.completions.create({ model, messages, tools, tool_choice: 'required', max_tokens: 120 });
  const m = tc.choices[0].message;
  if (tc.choices[0].finish_reason !== 'tool_calls' || !m.tool_calls?.length) fail('openai tool_choice required: ' + JSON.stringify(tc));
  for (const call of m.tool_calls) checkCall(call.function.name, call.function.arguments, 'openai tool call');
  // streamed: the SDK's accumulator rebuilds the calls from the deltas
  const s2 = client.chat.completions.stream({ model, messages, tools, tool_choice: { type: 'function', function: { name: 'add' } }, max_tokens: 60 });
  const fin = await s2.finalChatCompletion();
  const sc = fin.choices[0].message.tool_calls;
  if (!sc?.length || sc[0].function.name !== 'add') fail('openai streamed named tool call: ' + JSON.stringify(fin));
  checkCall('add', sc[0].function.arguments, 'openai streamed tool call');
  // round trip: the calls and their results go back
  const back = [...messages, m, ...m.tool_calls.map((t) => ({ role: 'tool', tool_call_id: t.id, content: '{"ok":true}' }))];
  const rt = await client.chat.completions.create({ model, messages: back, tools, max_tokens: 8 });
  if (!rt.choices[0].message) fail('openai round trip');
  log.push(`openai: completion, chat, stream, json_schema, ${m.tool_calls.length} required tool call(s) + streamed named call + round trip`);
}

// ---- ai + @ai-sdk/openai-compatible ---------------------------------
{
  const provider = createOpenAICompatible({ name: 'foliod', baseURL: base, apiKey: 'k', fetch, supportsStructuredOutputs: true });
  const models = await (await fetch(base + '/models')).json();
  const model = provider(models.data[0].id);
  const g = await generateText({ model, prompt: 'hi', maxOutputTokens: 8 });
  if (typeof g.text !== 'string') fail('ai generateText');
  const c = await generateText({ model: provider.completionModel(models.data[0].id), prompt: 'hi', maxOutputTokens: 8 });
  if (typeof c.text !== 'string') fail('ai completion model');
  const s = streamText({ model, prompt: 'hi', maxOutputTokens: 8 });
  let n = 0;
  for await (const part of s.textStream) n += part.length;
  const o = await generateObject({ model, schema: Person, prompt: 'a person', maxOutputTokens: 120 });
  checkPerson(o.object, 'ai generateObject');
  let executed = 0;
  const r = await generateText({
    model, prompt: 'weather in Paris, and 2+3?', maxOutputTokens: 120, toolChoice: 'required',
    tools: {
      get_weather: tool({ description: 'weather in a city', inputSchema: weatherParams, execute: async () => { executed++; return 'sunny'; } }),
      add: tool({ description: 'a + b', inputSchema: addParams, execute: async ({ a, b }) => { executed++; return a + b; } }),
    },
    stopWhen: stepCountIs(2),
  });
  const calls = r.steps[0].toolCalls;
  if (!calls.length || !executed || r.steps.length !== 2) fail('ai tools: ' + JSON.stringify(r.steps.map((x) => x.toolCalls)));
  for (const call of calls) checkCall(call.toolName, call.input, 'ai tool call');
  log.push(`ai: generateText (chat, completion), streamText, generateObject (nested), ${calls.length} required tool call(s) executed + round trip`);
}

// ---- @langchain/openai ----------------------------------------------
{
  const configuration = { baseURL: base, fetch };
  const models = await (await fetch(base + '/models')).json();
  const id = models.data[0].id;
  const llm = new ChatOpenAI({ model: id, apiKey: 'k', configuration, maxTokens: 120, maxRetries: 0 });
  const a = await llm.invoke('hi');
  if (typeof a.content !== 'string') fail('langchain invoke');
  let n = 0;
  for await (const chunk of await llm.stream('hi')) n += String(chunk.content).length;
  // chat logprobs through LangChain's response metadata
  const lpl = new ChatOpenAI({ model: id, apiKey: 'k', configuration, maxTokens: 6, maxRetries: 0,
                               logprobs: true, topLogprobs: 2 });
  const lpm = (await lpl.invoke('hi')).response_metadata?.logprobs?.content;
  if (!Array.isArray(lpm) || !lpm.length || lpm.some((e) => typeof e.logprob !== 'number' || e.top_logprobs.length !== 2))
    fail('langchain chat logprobs: ' + JSON.stringify(lpm));
  const comp = new LCOpenAI({ model: id, apiKey: 'k', configuration, maxTokens: 8, maxRetries: 0 });
  if (typeof (await comp.invoke('hi')) !== 'string') fail('langchain completions');
  for (const method of ['jsonSchema', 'functionCalling']) {
    const p = await llm.withStructuredOutput(Person, { method, name: 'person' }).invoke('a person');
    checkPerson(p, `langchain withStructuredOutput ${method}`);
  }
  const weather = lcTool(async () => 'sunny', { name: 'get_weather', description: 'weather in a city', schema: weatherParams });
  const add = lcTool(async ({ a: x, b: y }) => String(x + y), { name: 'add', description: 'a + b', schema: addParams });
  const bound = llm.bindTools([weather, add], { tool_choice: 'required' });
  const msgs = [new HumanMessage('weather in Paris, and 2+3?')];
  const ai = await bound.invoke(msgs);
  if (!ai.tool_calls?.length) fail('langchain bindTools required: ' + JSON.stringify(ai));
  for (const call of ai.tool_calls) checkCall(call.name, call.args, 'langchain tool call');
  msgs.push(ai);
  for (const call of ai.tool_calls) msgs.push(new ToolMessage({ tool_call_id: call.id, content: call.name === 'add' ? '5' : 'sunny' }));
  const fin = await llm.bindTools([weather, add]).invoke(msgs);
  if (!fin) fail('langchain round trip');
  // streamed tool calls rebuild from the deltas
  let acc;
  for await (const chunk of await bound.stream([new HumanMessage('2+3?')])) acc = acc ? acc.concat(chunk) : chunk;
  if (!acc.tool_calls?.length) fail('langchain streamed tool calls: ' + JSON.stringify(acc));
  for (const call of acc.tool_calls) checkCall(call.name, call.args, 'langchain streamed tool call');
  log.push(`langchain: invoke, stream, completions, withStructuredOutput (jsonSchema, functionCalling), bindTools ${ai.tool_calls.length} required call(s) + round trip + stream`);
}

await dispatcher.close();
console.log(`ok - ${via}:\n  ` + log.join('\n  '));
