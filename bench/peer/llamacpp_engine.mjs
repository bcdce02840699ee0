// bench/peer/llamacpp_engine.mjs MODEL.gguf [--threads N] [--num-prompts R]
//     [--max-concurrency C] [--input-len L] [--output-len O] [--json]
//
// The CPU peer measured on the same GGUF file and machine as foliod:
// llama.cpp as the node-llama-cpp npm package ships it (its prebuilt CPU
// library; there is no llama-server binary in that package).  Three
// figures, each the median of three runs where it is short:
//   prefill   L random tokens into an empty sequence (tokens/s)
//   single    greedy decode of O tokens after a 16-token prompt (tokens/s)
//   load      R requests, C at a time, each L prompt tokens then O greedy
//             output tokens, on one context of C sequences, so llama.cpp
//             batches the sequences' decodes into one evaluation exactly as
//             its server does (output tokens/s, mean and p99 time to first
//             token).  This is the engine without HTTP: an upper bound on
//             what llama.cpp's server does with the same load.
// bench/peer/run.sh installs the package and calls this script.
import {getLlama} from "node-llama-cpp";

const argv = process.argv.slice(2);
const modelPath = argv[0];
const opt = (name, def) => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : def;
};
const threads = opt("--threads", 2);
const R = opt("--num-prompts", 256);
const C = opt("--max-concurrency", 64);
const L = opt("--input-len", 128);
const O = opt("--output-len", 128);
const json = argv.includes("--json");

let seed = 12345n;
function rnd() {
    seed = (seed * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
    return Number(seed >> 33n);
}
const median = a => [...a].sort((x, y) => x - y)[Math.floor(a.length / 2)];
const now = () => performance.now() / 1000;

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const nVocab = model.tokens.vocabularySize;
// Ordinary tokens only (ids past the specials and byte tokens of the
// synthetic vocabularies), the same draw for every figure.
const randomTokens = n => Array.from({length: n}, () => 300 + (rnd() % (nVocab - 300)));

async function prefill() {
    const ctx = await model.createContext({contextSize: Math.max(1024, L + 16), batchSize: 512, threads,
                                           flashAttention: false});
    const seq = ctx.getSequence();
    const times = [];
    for (let r = 0; r < 3; r++) {
        const toks = randomTokens(512);
        await seq.clearHistory();
        const t0 = now();
        await seq.evaluateWithoutGeneratingNewTokens(toks);
        times.push(512 / (now() - t0));
    }
    await ctx.dispose();
    return median(times);
}

async function single() {
    const ctx = await model.createContext({contextSize: 1024, batchSize: 512, threads, flashAttention: false});
    const seq = ctx.getSequence();
    const rates = [];
    for (let r = 0; r < 3; r++) {
        await seq.clearHistory();
        let n = 0, t0 = 0;
        for await (const _tok of seq.evaluate(randomTokens(16), {temperature: 0})) {
            if (n === 0) t0 = now(); // decode rate: from the first output token on
            if (++n > O) break;
        }
        rates.push(O / (now() - t0));
    }
    await ctx.dispose();
    return median(rates);
}

async function load() {
    const ctx = await model.createContext({sequences: C, contextSize: C * (L + O + 16), batchSize: 2048,
                                           threads, flashAttention: false});
    const prompts = Array.from({length: R}, () => randomTokens(L));
    let next = 0, out = 0;
    const ttft = [];
    const t0 = now();
    async function worker() {
        const seq = ctx.getSequence();
        while (next < R) {
            const p = prompts[next++];
            await seq.clearHistory();
            const start = now();
            let n = 0;
            for await (const _tok of seq.evaluate(p, {temperature: 0})) {
                if (n === 0) ttft.push(now() - start);
                if (++n >= O) break;
            }
            out += n;
        }
        seq.dispose();
    }
    await Promise.all(Array.from({length: C}, worker));
    const dur = now() - t0;
    await ctx.dispose();
    ttft.sort((x, y) => x - y);
    return {
        output_tok_s: out / dur, duration_s: dur, completed: R, output_tokens: out,
        mean_ttft_s: ttft.reduce((a, b) => a + b, 0) / ttft.length,
        p99_ttft_s: ttft[Math.min(ttft.length - 1, Math.floor(0.99 * ttft.length))],
    };
}

const res = {model: modelPath, threads, prefill_tok_s: await prefill(), single_tok_s: await single()};
res.load = await load();
res.load.params = {num_prompts: R, max_concurrency: C, input_len: L, output_len: O};
if (json) {
    console.log(JSON.stringify(res));
} else {
    console.log(`llama.cpp engine (node-llama-cpp) on ${modelPath}, ${threads} threads`);
    console.log(`  prefill ${512} tokens      ${res.prefill_tok_s.toFixed(1)} tok/s`);
    console.log(`  single-stream decode    ${res.single_tok_s.toFixed(1)} tok/s`);
    const l = res.load;
    console.log(`  load ${R} req @ ${C}, ${L}/${O}: ${l.output_tok_s.toFixed(1)} output tok/s, ` +
                `mean TTFT ${l.mean_ttft_s.toFixed(2)} s, p99 TTFT ${l.p99_ttft_s.toFixed(2)} s, ${l.duration_s.toFixed(1)} s`);
}
