// tests/integration/llamacpp/compare_logits.mjs FOLIO_BIN CASE...
//
// CASE is LABEL|MODEL.gguf|TOL|PROMPTS[|LORA.gguf:SCALE].  Each MODEL is loaded in llama.cpp
// (the prebuilt library shipped by the node-llama-cpp npm package, CPU
// only, f32 KV cache) and in foliod's own runtime (`folio eval --json`);
// both get the same token ids and the logits after the last token are
// compared: the top-K token ids must match and every logit llama.cpp
// reports for them must agree within TOL (max abs).  Also compares a
// greedy continuation of GREEDY tokens (env, default 32): it must be
// identical, except that it may part where llama.cpp's top-2 margin is
// below TOL (a near-tie that rounding decides; the rest is not compared
// then).  On the first prompt of the cases with a tolerance of 1e-3 or
// less (the F32 files), the final hidden state after its last token
// (`folio eval --hidden`) must equal llama.cpp's embedding of it (an
// embedding context: for a file without a pooling type that is the last
// token's output-normed state, unnormalized) within TOL too: what foliod's
// /v1/embeddings pools.  A case whose label ends in "reranker" (a file with
// a classification head and pooling type rank) compares instead the
// relevance score of the first prompt: llama.cpp's rank pooling (an
// embeddings context on that file: the head over the last token's state,
// softmax for qwen3) against `folio eval --rank`, what /v1/rerank
// answers, within TOL.  With a LORA adapter file, both sides run it at
// SCALE (llama.cpp's context `lora` option, `folio eval --lora
// --lora-scale`), and no hidden state is compared.
// PROMPTS is how many of the prompts below are tried.  All cases
// run in one process (the library loads once) on one thread each side,
// so the test can run beside others.  Exits 0 when every case agrees, 1
// otherwise.
import {execFileSync} from "node:child_process";
import {getLlama} from "node-llama-cpp";

const [folioBin, ...cases] = process.argv.slice(2);
const TOP = 10;
const GREEDY = Number(process.env.GREEDY ?? 32);

function lcg(seed) {
    let s = BigInt(seed);
    return () => {
        s = (s * 6364136223846793005n + 1442695040888963407n) & ((1n << 64n) - 1n);
        return Number(s >> 33n);
    };
}

const llama = await getLlama({gpu: false, build: "never", progressLogs: false, logLevel: "error"});

// One case: MODEL against folio eval on its first N_PROMPTS prompts;
// returns how many disagreed.
async function compare(modelPath, TOL, N_PROMPTS, rank, lora) {
    const [loraPath, loraScale] = lora ? lora.split(":") : [null, null];
    const loraCtx = lora ? {lora: {adapters: [{filePath: loraPath, scale: Number(loraScale)}]}} : {};
    const loraArgs = lora ? ["--lora", loraPath, "--lora-scale", loraScale] : [];
    const model = await llama.loadModel({modelPath, gpuLayers: 0});
    const nVocab = model.fileInfo.metadata.tokenizer.ggml.tokens.length; // the file's vocabulary

    const rnd = lcg(12345);
    // (ids past a small vocabulary wrap; its last id stands for 31999)
    const fixed = [[1, 450, 4996 % nVocab, 17354 % nVocab], [1], [5, 9, 200, nVocab - 1, 7]];
    const random = [];
    for (let k = 0; k < 3; k++) {
        const len = 16 + 40 * k;
        random.push(Array.from({length: len}, () => 3 + (rnd() % (nVocab - 3))));
    }
    // the first PROMPTS of these: a short one, two random ones, then the rest
    const prompts = [fixed[0], random[0], random[1], fixed[1], fixed[2], random[2]];

    let worst = 0, worstHidden = 0;
    let failures = 0;
    // llama.cpp's embedding of the first prompt: what createEmbeddingContext
    // does (an embeddings context, the prompt evaluated without sampling,
    // then the context's embedding), with the f32 KV cache of the logits
    // comparison, which that public call cannot ask for (it would round K
    // and V to f16: about 1.5e-3 apart on F32 files).  The underscored
    // names are node-llama-cpp's internals, pinned by run.sh's version.
    const withEmbd = TOL <= 1e-3 && !lora;
    const ectx = withEmbd && await model.createContext({
        contextSize: 512, batchSize: 512, threads: 1, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", _embeddings: true,
    });
    let lcEmbd = null;
    if (withEmbd) {
        for await (const _token of ectx.getSequence().evaluate(prompts[0], {_noSampling: true}))
            break; // evaluated: the embedding is the context's now
        lcEmbd = Array.from(ectx._ctx.getEmbedding(prompts[0].length));
        if (rank)
            lcEmbd = lcEmbd.slice(0, 1); // the first label's probability
        await ectx.dispose();
    }
    for (const tokens of prompts.slice(0, N_PROMPTS)) {
        const ctx = await model.createContext({
            contextSize: 512, batchSize: 512, threads: 1, flashAttention: false,
            experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32", ...loraCtx,
        });
        const seq = ctx.getSequence();
        const input = tokens.map((t, i) => i === tokens.length - 1
            ? [t, {generateNext: {logits: true}}] : t);
        const res = await seq.controlledEvaluate(input);
        const lcLogits = res[tokens.length - 1].next.logits; // Map, sorted desc
        const lcTop = [...lcLogits.entries()].slice(0, TOP);

        // greedy continuation in llama.cpp
        const lcGreedy = [];
        const lcMargin = []; // top-2 margin before each greedy token
        let last = lcTop[0][0];
        let margin = lcTop[0][1] - lcTop[1][1];
        for (let g = 0; g < GREEDY; g++) {
            lcGreedy.push(last);
            lcMargin.push(margin);
            if (g + 1 === GREEDY) break;
            const r = await seq.controlledEvaluate([[last, {generateNext: {logits: {filter: {tokens: [], includeTop: 2}}}}]]);
            const top2 = [...r[0].next.logits.entries()];
            last = top2[0][0];
            margin = top2[0][1] - top2[1][1];
        }
        await ctx.dispose();

        // foliod's top 2*TOP, so a token at the edge of llama.cpp's top TOP is
        // found and compared even where the two orders differ by a near-tie
        const withHidden = withEmbd && tokens === prompts[0];
        const out = execFileSync(folioBin, ["eval", "--model", modelPath, "--tokens", tokens.join(","),
            "--top", String(2 * TOP), "--greedy", String(GREEDY), "--json", "--threads", "1", ...loraArgs,
            ...(withHidden ? [rank ? "--rank" : "--hidden"] : [])], {encoding: "utf8"});
        const fo = JSON.parse(out);
        if (withHidden && rank)
            fo.hidden = [fo.rank_score];
        let hiddenDiff = 0;
        if (withHidden) {
            if (!fo.hidden || fo.hidden.length !== lcEmbd.length)
                hiddenDiff = Infinity;
            else
                for (let k = 0; k < lcEmbd.length; k++)
                    hiddenDiff = Math.max(hiddenDiff, Math.abs(fo.hidden[k] - lcEmbd[k]));
            worstHidden = Math.max(worstHidden, hiddenDiff);
        }
        const foMap = new Map(fo.top.map(e => [e.id, e.logit]));
        let maxDiff = 0;
        for (const [id, logit] of lcTop) {
            if (!foMap.has(id)) { // not even in foliod's top 2*TOP
                maxDiff = Infinity;
                continue;
            }
            maxDiff = Math.max(maxDiff, Math.abs(foMap.get(id) - logit));
        }
        let parted = -1;
        for (let g = 0; g < GREEDY && parted < 0; g++)
            if (fo.greedy[g] !== lcGreedy[g]) parted = g;
        const nearTie = parted >= 0 && lcMargin[parted] < TOL;
        const sameGreedy = parted < 0 || nearTie;
        if (nearTie)
            console.log(`     greedy parts at step ${parted} where llama.cpp's top-2 margin is ` +
                `${lcMargin[parted].toExponential(2)} < ${TOL}: a near-tie`);
        worst = Math.max(worst, maxDiff);
        const top1Ok = fo.top[0].id === lcTop[0][0] || lcTop[0][1] - lcTop[1][1] < TOL;
        const ok = maxDiff <= TOL && hiddenDiff <= TOL && sameGreedy && top1Ok &&
            fo.greedy.length === GREEDY;
        if (!ok) failures++;
        console.log(`${ok ? "ok  " : "FAIL"} n=${tokens.length} top1=${lcTop[0][0]} ` +
            `max|dlogit|=${maxDiff.toExponential(2)}` +
            (withHidden && rank ? ` rank score ${fo.rank_score.toFixed(6)} |diff|=${hiddenDiff.toExponential(2)}`
                : withHidden ? ` max|dhidden|=${hiddenDiff.toExponential(2)} (${lcEmbd.length} values)` : "") +
            ` greedy ${sameGreedy ? "same" : "DIFFERS"}` +
            (sameGreedy ? "" : ` at step ${parted} (llama.cpp's top-2 margin ` +
                `${lcMargin[parted].toExponential(2)}) folio=${fo.greedy} llama.cpp=${lcGreedy}`));
    }
    const tried = Math.min(N_PROMPTS, prompts.length);
    console.log(`worst max|dlogit| = ${worst.toExponential(3)}` +
        (withEmbd ? `, ${rank ? "rank score" : "embedding max"} |diff| = ${worstHidden.toExponential(3)}` : "") +
        ` (tolerance ${TOL}); ` +
        `${tried - failures} passed, ${failures} failed`);
    await model.dispose();
    return failures;
}

let failed = 0;
for (const c of cases) {
    const [label, modelPath, tol, prompts, lora] = c.split("|");
    console.log(`== ${label} (tolerance ${tol})`);
    if (await compare(modelPath, Number(tol), Number(prompts), label.endsWith("reranker"), lora))
        failed++;
}
console.log(`${cases.length - failed} of ${cases.length} cases agree`);
process.exit(failed ? 1 : 0);
