'use strict';
// The Node binding against the built-in demo checkpoint (libsolo through koffi).
const test = require('node:test');
const assert = require('node:assert');
const { Engine, SoloError, gateCheck } = require('..');

const ASK = [{ role: 'user', content: 'What color is the sky?' }];

test('the binding', async (t) => {
  const engine = await Engine.open(null, { backend: 'cpu' });
  t.after(() => engine.close());

  await t.test('info', () => {
    const info = engine.info();
    assert.strictEqual(info.backend, 'cpu');
    assert.ok(info.vocab > 0);
  });

  await t.test('a whole chat completion', async () => {
    const reply = await engine.chat(ASK, { max_tokens: 8, temperature: 0 });
    assert.strictEqual(reply.object, 'chat.completion');
    assert.ok(reply.usage.completion_tokens >= 1);
  });

  await t.test('a stream, as an async iterator, adds up to the whole reply', async () => {
    const whole = await engine.chat(ASK, { max_tokens: 12, temperature: 0 });
    let text = '';
    let chunks = 0;
    for await (const chunk of await engine.chat(ASK, { max_tokens: 12, temperature: 0, stream: true })) {
      assert.strictEqual(chunk.object, 'chat.completion.chunk');
      chunks += 1;
      const d = chunk.choices[0].delta;
      text += (d.content ?? '') + (d.reasoning_content ?? '');
    }
    const m = whole.choices[0].message;
    assert.ok(chunks >= 3);
    assert.strictEqual(text, (m.reasoning_content ?? '') + (m.content ?? ''));
  });

  await t.test('cancel ends a stream early', async () => {
    const never = {};
    for (const tok of ['<|im_end|>', '<|endoftext|>']) never[engine.tokenize(tok)[0]] = -100;
    const stream = await engine.completion('Once upon a time', { max_tokens: 2000, logit_bias: never, stream: true });
    const finishes = [];
    let n = 0;
    for await (const chunk of stream) {
      n += 1;
      if (n === 3) stream.cancel();
      if (chunk.choices.length) finishes.push(chunk.choices[0].finish_reason);
    }
    assert.ok(stream.cancelled);
    assert.ok(n < 2000);
    assert.ok(!finishes.includes('length') && !finishes.includes('stop'));
  });

  await t.test('errors reject with the status and message', async () => {
    await assert.rejects(engine.chat([{ role: 'wizard', content: 'hi' }]), (e) => {
      assert.ok(e instanceof SoloError);
      assert.strictEqual(e.status, 'SOLO_INVALID_REQUEST');
      assert.strictEqual(e.httpStatus, 400);
      assert.match(e.message, /role/);
      return true;
    });
    await assert.rejects(Engine.open(null, { colour: 'blue' }), /SOLO_INVALID_ARGUMENT.*colour/);
  });

  await t.test('tokenize round-trips; the gate finds an email', () => {
    const ids = engine.tokenize('Hello, world');
    assert.ok(ids.length > 0);
    assert.strictEqual(engine.detokenize(ids), 'Hello, world');
    assert.deepStrictEqual(gateCheck('write to jane.doe@example.com').spans.map((s) => s.type), ['EMAIL']);
  });
});
