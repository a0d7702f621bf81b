// solo inside a Node program: the engine in this process through libsolo (koffi), no server.
//   cargo build -p solo-capi && (cd bindings/node && npm install)
//   SOLO_LIB=target/debug/libsolo.so node examples/node/chat.js
const { Engine, gateCheck } = require('../../bindings/node');

async function main() {
  const engine = await Engine.open(null, { backend: 'cpu' }); // null: the built-in demo checkpoint
  console.log(engine.info());

  const reply = await engine.chat([{ role: 'user', content: 'What color is the sky?' }], { max_tokens: 64 });
  console.log(reply.choices[0].message.content, reply.usage);

  const stream = await engine.chat([{ role: 'user', content: 'Name an animal.' }], { stream: true, max_tokens: 64 });
  for await (const chunk of stream) process.stdout.write(chunk.choices[0].delta.content ?? '');
  process.stdout.write('\n');

  console.log(engine.tokenize('Hello, world'), gateCheck('mail jane.doe@example.com').outcome);
  engine.close();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
