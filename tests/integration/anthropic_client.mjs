// tests/integration/anthropic_client.mjs BASE_URL KEY — Anthropic's own
// client (@anthropic-ai/sdk, npm) against foliod's /v1/messages: create,
// stream (the same text and stop reason), countTokens (the same input
// tokens), an unknown model raised as NotFoundError.
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
console.log(`sdk: ${m.usage.output_tokens} tokens, ${m.stop_reason}`);
