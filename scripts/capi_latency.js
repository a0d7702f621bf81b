// The Node binding's delivery delay, as scripts/capi_latency.py measures Python's: libsolo stamps
// each streamed chunk (SOLO_STAMP_CHUNKS=1, CLOCK_MONOTONIC) and process.hrtime (the same clock
// on Linux) is read as the chunk reaches the `for await` body.
//   SOLO_LIB=target/release/libsolo.so node scripts/capi_latency.js [REQUESTS]
process.env.SOLO_STAMP_CHUNKS = '1';
const { Engine } = require('../bindings/node');

async function main() {
  const requests = Number(process.argv[2] ?? 20);
  const engine = await Engine.open(null, { backend: 'cpu' });
  const never = {};
  for (const t of ['<|im_end|>', '<|endoftext|>']) never[engine.tokenize(t)[0]] = -100;
  const delays = [];
  for (let i = 0; i < requests; i++) {
    const stream = await engine.completion('Once upon a time', { max_tokens: 64, logit_bias: never, stream: true });
    for await (const chunk of stream) {
      const now = process.hrtime.bigint();
      if (chunk.solo_relayed_ns) delays.push(Number(now - BigInt(chunk.solo_relayed_ns)) / 1000);
    }
  }
  engine.close();
  delays.sort((a, b) => a - b);
  const pct = (q) => delays[Math.min(delays.length - 1, Math.floor(q * delays.length))];
  console.log(`node: ${delays.length} chunks, delay from libsolo to the loop body: p50 ${pct(0.5).toFixed(1)} µs, ` +
    `p99 ${pct(0.99).toFixed(1)} µs, max ${delays[delays.length - 1].toFixed(1)} µs; over 1 ms: ${delays.filter((d) => d > 1000).length}`);
}
main();
