// tests/integration/anthropic_client.mjs BASE_URL KEY — Anthropic's own
// client (@anthropic-ai/sdk, npm) against foliod's /v1/messages: create,
// stream (the same text and stop reason), countTokens (the same input
// tokens), an unknown model raised as NotFoundError, a tool round trip
// (tool_use whole and streamed, its tool_result sent back).
import Anthropic from "@anthropic-ai/sdk";
const [base, key] = process.argv.slice(2);
const a = new Anthropic({ baseURL: base, apiKey: key });
const body = { model: "folio-tiny-default", max_tokens: 16, temperature: 0,
               system: "Be brief.", messages: [{ role: "user", content: "Hello there" }] };
const m = await a.messages.create(body);
if (m.type !== "message" || m.content[0].type !== "text" || !m.usage.output_tokens) throw new Error(JSON.stringify(m));
let text = "";
const s = a.messages.stream(body);
s.on("text", (t) => { text += t; });
const fin = await s.finalMessage();
if (text !== m.content[0].text || fin.content[0].text !== text || fin.stop_reason !== m.stop_reason)
  throw new Error(`stream ${JSON.stringify(text)} vs ${JSON.stringify(m.content[0].text)}`);
const c = await a.messages.countTokens({ model: body.model, system: body.system, messages: body.messages });
if (c.input_tokens !== m.usage.input_tokens) throw new Error(`count ${c.input_tokens}`);
try { await a.messages.create({ ...body, model: "other" }); throw new Error("accepted"); }
catch (e) { if (!(e instanceof Anthropic.NotFoundError)) throw e; }
// a tool round trip: a forced call, its result sent back
const tools = [{ name: "get_weather", description: "weather",
                 input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
const ask = [{ role: "user", content: "Weather in Paris?" }];
const t = await a.messages.create({ model: body.model, max_tokens: 64, temperature: 0, tools,
                                    tool_choice: { type: "any" }, messages: ask });
const use = t.content.find((b) => b.type === "tool_use");
if (t.stop_reason !== "tool_use" || !use || typeof use.input.city !== "string") throw new Error(JSON.stringify(t));
const ts = await a.messages.stream({ model: body.model, max_tokens: 64, temperature: 0, tools,
                                     tool_choice: { type: "any" }, messages: ask }).finalMessage();
const suse = ts.content.find((b) => b.type === "tool_use");
if (ts.stop_reason !== "tool_use" || JSON.stringify(suse.input) !== JSON.stringify(use.input))
  throw new Error(`streamed tool_use ${JSON.stringify(ts)}`);
const r = await a.messages.create({ model: body.model, max_tokens: 8, temperature: 0, tools, messages: [
  ...ask, { role: "assistant", content: t.content },
  { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "sunny" }] }] });
if (r.type !== "message" || !r.usage.input_tokens) throw new Error(JSON.stringify(r));
console.log(`sdk: ${m.usage.output_tokens} tokens, ${m.stop_reason}; tool_use ${use.name}`);
