// The official OpenAI JavaScript client, unchanged, against `parallm serve`: completions and chat, streamed and
// not, n, logprobs, stop, seed reproducibility, include_usage, and the SDK's error classes for bad input.
// Usage: node openai_client.mjs PARALLM_BINARY FIXTURES_DIR
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer } from "./start_server.mjs";

const [binary, fixtures] = process.argv.slice(2);
const here = dirname(fileURLToPath(import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), "parallm-node-"));
const model = join(tmp, "q3.gguf");
const made = spawnSync(binary, ["make-model", "--arch", "qwen3", "--dtype", "q8_0", "--tokenizer",
                                join(fixtures, "tokenizers", "qwen3"), "-o", model], { encoding: "utf8" });
assert.equal(made.status, 0, made.stderr);

const { server, port } = await startServer(binary, ["-m", model, "--served-model-name", "tiny", "--api-key", "sk-test",
                                                     "--kv-cache-gb", "0.25", "-t", "2"]);

const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "sk-test", maxRetries: 0 });
const HOT = { temperature: 100, top_k: 20 };  // the random model is very peaked: sampling must matter
let checks = 0;
async function check(name, fn) {
  await fn();
  ++checks;
  console.log(`ok   ${name}`);
}

try {
  await check("models", async () => {
    const models = await client.models.list();
    assert.equal(models.data[0].id, "tiny");
  });

  await check("completions, streamed equals whole, include_usage", async () => {
    const whole = await client.completions.create({ model: "tiny", prompt: "Hello world", max_tokens: 6, ignore_eos: true });
    assert.equal(whole.object, "text_completion");
    assert.equal(whole.choices[0].finish_reason, "length");
    assert.deepEqual(whole.usage, { prompt_tokens: 2, completion_tokens: 6, total_tokens: 8,
                                    prompt_tokens_details: { cached_tokens: whole.usage.prompt_tokens_details.cached_tokens } });
    const stream = await client.completions.create({ model: "tiny", prompt: "Hello world", max_tokens: 6, ignore_eos: true,
                                                     stream: true, stream_options: { include_usage: true } });
    let text = "";
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) text += c.text;
    }
    assert.equal(text, whole.choices[0].text);
    assert.equal(usage.completion_tokens, 6);
  });

  await check("chat, streamed equals whole, role first, include_usage", async () => {
    const messages = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hi" }];
    const whole = await client.chat.completions.create({ model: "tiny", messages, max_completion_tokens: 5, ignore_eos: true });
    assert.equal(whole.object, "chat.completion");
    assert.equal(whole.choices[0].message.role, "assistant");
    const stream = await client.chat.completions.create({ model: "tiny", messages, max_completion_tokens: 5,
                                                          ignore_eos: true, stream: true,
                                                          stream_options: { include_usage: true } });
    let text = "";
    let first = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (first === null) first = c.delta;
        text += c.delta.content ?? "";
      }
    }
    assert.equal(first.role, "assistant");
    assert.equal(text, whole.choices[0].message.content);
    // The same 17-token prompt again: its first full block (16 tokens) comes from the prefix cache.
    assert.deepEqual(usage, { ...whole.usage, prompt_tokens_details: { cached_tokens: 16 } });
  });

  await check("n and seed reproducibility", async () => {
    const a = await client.completions.create({ model: "tiny", prompt: "Once", max_tokens: 8, n: 3, seed: 42, ...HOT });
    const b = await client.completions.create({ model: "tiny", prompt: "Once", max_tokens: 8, n: 3, seed: 42, ...HOT });
    assert.equal(a.choices.length, 3);
    assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
    assert.equal(new Set(a.choices.map((c) => c.text)).size, 3, "the n copies should differ");
    const c = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "Hi" }],
                                                    max_tokens: 8, n: 2, seed: 7, ...HOT });
    const d = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "Hi" }],
                                                    max_tokens: 8, n: 2, seed: 7, ...HOT });
    assert.deepEqual(c.choices.map((x) => x.message.content), d.choices.map((x) => x.message.content));
  });

  await check("logprobs in both shapes", async () => {
    const comp = await client.completions.create({ model: "tiny", prompt: "Hello", max_tokens: 3, logprobs: 2 });
    const lp = comp.choices[0].logprobs;
    assert.equal(lp.tokens.length, 3);
    assert.equal(lp.tokens.join(""), comp.choices[0].text);
    assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
    const chat = await client.chat.completions.create({ model: "tiny", messages: [{ role: "user", content: "Hi" }],
                                                       max_tokens: 3, logprobs: true, top_logprobs: 2 });
    const content = chat.choices[0].logprobs.content;
    assert.equal(content.length, 3);
    assert.equal(content[0].top_logprobs.length, 2);
    assert.deepEqual(content[0].bytes, [...Buffer.from(content[0].token, "utf8")]);
  });

  await check("stop", async () => {
    const whole = await client.completions.create({ model: "tiny", prompt: "The", max_tokens: 10, seed: 3, ...HOT });
    const text = whole.choices[0].text;
    const stop = text.slice(4, 6);
    const cut = await client.completions.create({ model: "tiny", prompt: "The", max_tokens: 10, seed: 3, ...HOT,
                                                  stop: [stop] });
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, "stop");
  });

  await check("errors as the SDK's classes", async () => {
    await assert.rejects(client.completions.create({ model: "tiny", prompt: "x", temperature: -1 }), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, String(e));
      assert.equal(e.status, 400);
      assert.equal(e.param, "temperature");
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] }),
                         (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
    await assert.rejects(client.chat.completions.create({ model: "tiny", messages: [] }),
                         (e) => e instanceof OpenAI.BadRequestError && e.param === "messages");
    const unauthorized = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(unauthorized.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
  });

  await check("README's JavaScript example", async () => {
    const readme = readFileSync(join(here, "..", "..", "..", "README.md"), "utf8");
    const m = readme.match(/## Server[\s\S]*?```js\n([\s\S]*?)```/);
    assert.ok(m, "README has no ```js example in its Server section");
    // The example's port and key are this server's.
    const code = m[1].replaceAll("8091", String(port)).replace('apiKey: "unused"', 'apiKey: "sk-test"');
    const dir = join(tmp, "readme");
    spawnSync("mkdir", [dir]);
    symlinkSync(join(here, "node_modules"), join(dir, "node_modules"));
    writeFileSync(join(dir, "example.mjs"), code);
    const r = spawnSync("node", [join(dir, "example.mjs")], { encoding: "utf8" });
    assert.equal(r.status, 0, r.stderr);
    assert.ok(r.stdout.length > 1, "the example printed no text");  // the random model may answer whitespace
  });
} finally {
  server.kill("SIGTERM");
  const code = await new Promise((resolve) => server.on("exit", (c) => resolve(c)));
  rmSync(tmp, { recursive: true, force: true });
  assert.equal(code, 0, "SIGTERM must exit 0");
}
console.log(`openai_client.mjs: all ${checks} checks passed with the openai ${(await import("openai/version.mjs")).VERSION} client`);
