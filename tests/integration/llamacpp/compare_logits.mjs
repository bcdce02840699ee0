// tests/integration/llamacpp/compare_logits.mjs MODEL.gguf FOLIO_BIN
//
// Loads MODEL.gguf in llama.cpp (the prebuilt library shipped by the
// node-llama-cpp npm package, CPU only, f32 KV cache) and in foliod's own
// runtime (`folio eval --json`), feeds both the same token ids and compares
// the logits after the last token: the top-K token ids must match and every
// logit llama.cpp reports for them must agree within TOL.  Also compares a
// greedy continuation.  Exits 0 on agreement, 1 on disagreement.
import {execFileSync} from "node:child_process";
import {getLlama} from "node-llama-cpp";

const [modelPath, folioBin] = process.argv.slice(2);
const TOL = Number(process.env.TOL ?? 1e-3);
const TOP = 20;
const GREEDY = 8;

function lcg(seed) {
    let s = BigInt(seed);
    return () => {
        s = (s * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
        return Number(s >> 33n);
    };
}

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});
const model = await llama.loadModel({modelPath, gpuLayers: 0});
const nVocab = model.tokens.vocabularySize ?? 32000;

const rnd = lcg(12345);
const prompts = [[1], [1, 450, 4996, 17354], [5, 9, 200, 31999, 7]];
for (let k = 0; k < 3; k++) {
    const len = 16 + 40 * k;
    prompts.push(Array.from({length: len}, () => 3 + (rnd() % (nVocab - 3))));
}

let worst = 0;
let failures = 0;
for (const tokens of prompts) {
    const ctx = await model.createContext({
        contextSize: 512, batchSize: 512, threads: 2, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const seq = ctx.getSequence();
    const input = tokens.map((t, i) => i === tokens.length - 1
        ? [t, {generateNext: {logits: true}}] : t);
    const res = await seq.controlledEvaluate(input);
    const lcLogits = res[tokens.length - 1].next.logits; // Map, sorted desc
    const lcTop = [...lcLogits.entries()].slice(0, TOP);

    // greedy continuation in llama.cpp
    const lcGreedy = [];
    let last = lcTop[0][0];
    for (let g = 0; g < GREEDY; g++) {
        lcGreedy.push(last);
        const r = await seq.controlledEvaluate([[last, {generateNext: {logits: {filter: {tokens: [], includeTop: 1}}}}]]);
        last = [...r[0].next.logits.keys()][0];
    }
    await ctx.dispose();

    const out = execFileSync(folioBin, ["eval", "--model", modelPath, "--tokens", tokens.join(","),
        "--top", String(TOP), "--greedy", String(GREEDY), "--json"], {encoding: "utf8"});
    const fo = JSON.parse(out);
    const foMap = new Map(fo.top.map(e => [e.id, e.logit]));
    let maxDiff = 0;
    for (const [id, logit] of lcTop) {
        if (!foMap.has(id)) {
            // allow a swap only at the tail where logits are within tolerance
            const tail = fo.top[fo.top.length - 1].logit;
            if (logit < tail - TOL) continue;
            maxDiff = Infinity;
            continue;
        }
        maxDiff = Math.max(maxDiff, Math.abs(foMap.get(id) - logit));
    }
    const sameGreedy = JSON.stringify(fo.greedy) === JSON.stringify(lcGreedy);
    worst = Math.max(worst, maxDiff);
    const ok = maxDiff <= TOL && sameGreedy && fo.top[0].id === lcTop[0][0];
    if (!ok) failures++;
    console.log(`${ok ? "ok  " : "FAIL"} n=${tokens.length} top1=${lcTop[0][0]} ` +
        `max|dlogit|=${maxDiff.toExponential(2)} greedy ${sameGreedy ? "same" : "DIFFERS"}` +
        (sameGreedy ? "" : ` folio=${fo.greedy} llama.cpp=${lcGreedy}`));
}
console.log(`worst max|dlogit| = ${worst.toExponential(3)} (tolerance ${TOL}); ` +
    `${prompts.length - failures} passed, ${failures} failed`);
await model.dispose();
process.exit(failures ? 1 : 0);
