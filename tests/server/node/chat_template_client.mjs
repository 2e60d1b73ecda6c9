// `parallm serve --chat-template` with the official OpenAI JavaScript client: a GGUF without a chat template
// (fixtures' llama-2-tiny-random.gguf) refuses chat naming the flag; given a template file (Mistral-Nemo's, from
// llama.cpp's collection) or template text on the command line, the client's chat calls, streamed and not, succeed
// and the prompt is the template's rendering (its token count is what /tokenize gives for the rendered text).
// Usage: node chat_template_client.mjs PARALLM_BINARY FIXTURES_DIR
import { join } from "node:path";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer } from "./start_server.mjs";

const [binary, fixtures] = process.argv.slice(2);
const model = join(fixtures, "models", "llama-2-tiny-random", "llama-2-tiny-random.gguf");
const templateFile = join(fixtures, "chat-templates", "mistralai-Mistral-Nemo-Instruct-2407.jinja");

// Starts `parallm serve` on a free port; resolves to { server, port } once the model is ready.
async function serve(...extra) {
  const { server, port } = await startServer(binary, ["-m", model, "--served-model-name", "tiny", "--kv-cache-gb", "0.05",
                                                       "-t", "1", ...extra]);
  return { server, port };
}

async function stop(server) {
  const exited = new Promise((resolve) => server.on("exit", (c) => resolve(c)));
  server.kill("SIGTERM");
  assert.equal(await exited, 0, "SIGTERM must exit 0");
}

const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello there" }];
let checks = 0;
async function check(name, fn) {
  await fn();
  ++checks;
  console.log(`ok   ${name}`);
}

// Without a template: chat is a 400 that says how to give one; plain completions still work.
{
  const { server, port } = await serve();
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
    await check("no template: chat refused naming --chat-template", async () => {
      await assert.rejects(client.chat.completions.create({ model: "tiny", messages, max_tokens: 4 }), (e) => {
        assert.ok(e instanceof OpenAI.BadRequestError, String(e));
        assert.match(e.message, /no chat template/);
        assert.match(e.message, /--chat-template/);
        return true;
      });
      const c = await client.completions.create({ model: "tiny", prompt: "Hello", max_tokens: 3, ignore_eos: true });
      assert.equal(c.usage.completion_tokens, 3);
    });
  } finally {
    await stop(server);
  }
}

// The rendered prompt's token count, by the server's own /tokenize of the text (no BOS added: the template wrote it).
async function renderedTokens(port, text) {
  const r = await fetch(`http://127.0.0.1:${port}/tokenize`, {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "tiny", prompt: text, add_special_tokens: false }),
  });
  assert.equal(r.status, 200);
  return (await r.json()).count;
}

// A template file.
{
  const { server, port } = await serve("--chat-template", templateFile);
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
    await check("--chat-template FILE: chat, whole and streamed", async () => {
      const whole = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 5, ignore_eos: true });
      assert.equal(whole.object, "chat.completion");
      assert.equal(whole.choices[0].message.role, "assistant");
      assert.equal(whole.choices[0].finish_reason, "length");
      assert.equal(whole.usage.completion_tokens, 5);
      // Mistral-Nemo's rendering: BOS, then the system message folded into the last user turn.
      const expected = await renderedTokens(port, "<s>[INST]Be brief.\n\nHello there[/INST]");
      assert.equal(whole.usage.prompt_tokens, expected);
      const stream = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 5, ignore_eos: true,
                                                            stream: true, stream_options: { include_usage: true } });
      let text = "";
      let usage = null;
      for await (const chunk of stream) {
        for (const c of chunk.choices) text += c.delta.content ?? "";
        if (chunk.usage) usage = chunk.usage;
      }
      assert.equal(text, whole.choices[0].message.content);
      assert.equal(usage.prompt_tokens, expected);
    });
    await check("--chat-template FILE: the template's own errors are 400s", async () => {
      // Mistral-Nemo raises on roles that do not alternate.
      const bad = [{ role: "user", content: "a" }, { role: "user", content: "b" }];
      await assert.rejects(client.chat.completions.create({ model: "tiny", messages: bad, max_tokens: 2 }),
                           (e) => e instanceof OpenAI.BadRequestError && /alternate/.test(e.message));
    });
  } finally {
    await stop(server);
  }
}

// Template text given inline.
{
  const inline = "{% for m in messages %}<<{{ m.role }}>>{{ m.content }}\n{% endfor %}<<assistant>>";
  const { server, port } = await serve("--chat-template", inline);
  try {
    const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
    await check("--chat-template TEXT: chat uses it", async () => {
      const r = await client.chat.completions.create({ model: "tiny", messages, max_tokens: 2, ignore_eos: true });
      const expected = await renderedTokens(port, "<<system>>Be brief.\n<<user>>Hello there\n<<assistant>>");
      assert.equal(r.usage.prompt_tokens, expected);
    });
  } finally {
    await stop(server);
  }
}
console.log(`chat_template_client.mjs: all ${checks} checks passed`);
