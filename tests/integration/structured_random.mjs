// tests/integration/structured_random.mjs — random JSON Schemas x random
// seeds against foliod serving a synthetic model: every output must parse
// and validate (ajv).  The model emits random tokens: constrained decoding
// is what makes the outputs valid.
// Usage: node structured_random.mjs SOCKET N  (run from a dir with node_modules)
import Ajv from 'ajv';
import { Agent, fetch } from 'undici';

const [sock, nArg] = process.argv.slice(2);
const N = Number(nArg || 1000);
const dispatcher = new Agent({ connect: { socketPath: sock }, connections: 16 });
const fail = (m) => { console.error('FAIL: ' + m); process.exit(1); };

let rs = 12345;
const rnd = (n) => { rs = (rs * 1103515245 + 12345) % 2147483648; return rs % n; };
const pick = (a) => a[rnd(a.length)];
const WORDS = ['id', 'name', 'city', 'zip', 'tags', 'items', 'x y', 'é', 'q"t', 'a\\b', 'n1', 'deep'];

function schema(depth, defs) {
  const k = rnd(depth < 3 ? 12 : 7);
  let s;
  switch (k) {
  case 0: s = { type: 'string' }; if (rnd(2)) { const lo = rnd(3); s.minLength = lo; s.maxLength = lo + rnd(6); } break;
  case 1: s = { type: 'integer' }; break;
  case 2: s = { type: 'number' }; break;
  case 3: s = { type: 'boolean' }; break;
  case 4: s = { enum: pick([['a', 'b', 'c'], [1, 2.5, null, 'x'], [true, { k: [1] }], ['ü "q"', '\n']]) }; break;
  case 5: s = { type: pick([['string', 'null'], ['integer', 'boolean'], 'null']) }; break;
  case 6: s = defs.has ? { $ref: '#/$defs/node' } : { const: pick(['fixed', 42, null, [1, 'a']]) }; break;
  case 7: case 8: case 9: {
    const props = {}, req = [];
    const n = rnd(5);
    for (let i = 0; i < n; i++) {
      const w = pick(WORDS);
      if (props[w]) continue;
      props[w] = schema(depth + 1, defs);
      if (rnd(2)) req.push(w);
    }
    s = { type: 'object', properties: props, required: req, additionalProperties: false };
    break;
  }
  case 10: s = { type: 'array', items: schema(depth + 1, defs) }; if (rnd(2)) { s.minItems = rnd(2); s.maxItems = s.minItems + rnd(3); } break;
  default: s = { anyOf: [schema(depth + 1, defs), schema(depth + 1, defs)] };
  }
  if (rnd(5) === 0) s.description = 'a field';
  return s;
}

function makeSchema() {
  const defs = { has: rnd(4) === 0 };
  const root = schema(0, defs);
  if (defs.has) {
    root.$defs = { node: { type: 'object', properties: { v: { type: 'integer' }, next: { $ref: '#/$defs/node' } }, required: ['v'], additionalProperties: false } };
  }
  return root;
}

const ajv = new Ajv({ strict: false, allErrors: false });
let done = 0, chat = 0, complete = 0;
const t0 = Date.now();

async function one(i) {
  const sch = makeSchema();
  const useChat = i % 2 === 0;
  const body = {
    max_tokens: 96, seed: 1000 + i, temperature: 1,
    response_format: { type: 'json_schema', json_schema: { name: 's' + i, strict: i % 3 === 0, schema: sch } },
  };
  if (useChat) body.messages = [{ role: 'user', content: 'reply in JSON #' + i }];
  else body.prompt = 'JSON #' + i + ':';
  const r = await fetch(`http://localhost/v1/${useChat ? 'chat/' : ''}completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), dispatcher,
  });
  const j = await r.json();
  if (r.status !== 200) fail(`status ${r.status} for ${JSON.stringify(sch)}: ${JSON.stringify(j)}`);
  const text = useChat ? j.choices[0].message.content : j.choices[0].text;
  let doc;
  try { doc = JSON.parse(text); } catch (e) { fail(`schema ${JSON.stringify(sch)} seed ${1000 + i}: output does not parse: ${JSON.stringify(text)}`); }
  const validate = ajv.compile(sch);
  if (!validate(doc)) fail(`schema ${JSON.stringify(sch)} seed ${1000 + i}: ${JSON.stringify(text)} invalid: ${ajv.errorsText(validate.errors)}`);
  if (j.choices[0].finish_reason === 'stop') complete++;
  chat += useChat;
  done++;
}

const CONC = 16;
let next = 0;
await Promise.all(Array.from({ length: CONC }, async () => { while (next < N) await one(next++); }));
await dispatcher.close();
console.log(`ok - ${done} random (schema, seed) pairs (${chat} chat, ${done - chat} completions): all parse and validate; ` +
  `${complete} ended by EOS, the rest closed within max_tokens (${((Date.now() - t0) / 1000).toFixed(1)} s)`);
