// Tool calling end to end with the official OpenAI JavaScript client: a conversation in which the model calls a
// tool, the tool's result goes back, and the model answers; the streamed call's deltas reassemble to the whole one.
//
// The model is real, and its call is its own greedy output: `parallm make-model --script` writes a tiny Qwen3
// model (Qwen3's tokenizer and chat template) whose next token depends only on the last one, scripted so that after
// a forced call's opening (tool_choice naming get_weather ends the prompt with `<tool_call>\n{"name":
// "get_weather", "arguments": `) it writes `{"city": "Paris"}}</tool_call>` and, after the assistant's turn header,
// "It is sunny in Paris.". The server knows nothing of the script: it renders the template with the tools, runs
// the engine, and parses the answer with the hermes parser it detected from the template.
// Usage: node tool_calls_client.mjs PARALLM_BINARY FIXTURES_DIR
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { startServer } from "./start_server.mjs";

const [binary, fixtures] = process.argv.slice(2);
const dir = mkdtempSync(join(tmpdir(), "parallm-tools-"));
const modelDir = join(dir, "scripted-qwen3");
execFileSync(binary, ["make-model", "--arch", "qwen3", "--hidden", "64", "--layers", "1", "--heads", "2",
                      "--kv-heads", "1", "--head-dim", "32", "--ffn", "64", "--format", "hf", "--dtype", "f16",
                      "--tokenizer", join(fixtures, "tokenizers", "qwen3"),
                      "--script", '"arguments": =>{"city": "Paris"}}</tool_call><|im_end|>',
                      "--script", "assistant\n=>It is sunny in Paris.<|im_end|>",
                      "-o", modelDir], { stdio: ["ignore", "ignore", "inherit"] });

const tools = [{
  type: "function",
  function: {
    name: "get_weather", description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
}];
const question = [{ role: "user", content: "What is the weather in Paris?" }];
const named = { type: "function", function: { name: "get_weather" } };

const { server, port } = await startServer(binary, ["-m", modelDir, "--served-model-name", "tiny", "--kv-cache-gb",
                                                    "0.05", "-t", "1", "--enable-auto-tool-choice"]);
let checks = 0;
async function check(name, fn) {
  await fn();
  ++checks;
  console.log(`ok   ${name}`);
}
try {
  const client = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "unused", maxRetries: 0 });
  let call;
  await check("the model calls the named tool: tool_calls, null content, finish_reason tool_calls", async () => {
    const r = await client.chat.completions.create({ model: "tiny", messages: question, tools, tool_choice: named });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    call = choice.message.tool_calls[0];
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    assert.equal(call.function.arguments, '{"city": "Paris"}');
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
  });

  await check("streamed: id and name first, then the arguments; reassembled equals the whole call", async () => {
    const stream = await client.chat.completions.create({ model: "tiny", messages: question, tools, tool_choice: named,
                                                          stream: true });
    let content = "";
    const calls = [];
    const finishes = [];
    let first = null;
    for await (const chunk of stream) {
      const choice = chunk.choices[0];
      if (!choice) continue;
      if (choice.delta.content) content += choice.delta.content;
      for (const d of choice.delta.tool_calls ?? []) {
        if (!calls[d.index]) {
          assert.ok(d.id && d.function?.name, `the first delta of a call names it: ${JSON.stringify(d)}`);
          calls[d.index] = { id: d.id, name: d.function.name, arguments: "" };
          first ??= d;
        }
        calls[d.index].arguments += d.function?.arguments ?? "";
      }
      if (choice.finish_reason) finishes.push(choice.finish_reason);
    }
    assert.equal(content, "");  // no <tool_call> markup leaks into the content
    assert.deepEqual(finishes, ["tool_calls"]);
    assert.equal(calls.length, 1);
    assert.match(calls[0].id, /^call_/);
    assert.deepEqual({ name: calls[0].name, arguments: calls[0].arguments },
                     { name: call.function.name, arguments: call.function.arguments });
    assert.equal(first.type, "function");
  });

  await check("the tool's result goes back through the template; the model answers", async () => {
    const messages = [...question,
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: '{"sky": "sunny", "celsius": 21}' }];
    const r = await client.chat.completions.create({ model: "tiny", messages, tools });
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.equal(r.choices[0].message.content, "It is sunny in Paris.");
    assert.equal(r.choices[0].message.tool_calls, undefined);
    // The prompt held the call and the result: Qwen3's template writes them as <tool_call> and <tool_response>.
    const tok = await fetch(`http://127.0.0.1:${port}/tokenize`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ model: "tiny", messages, tools }),
    }).then((x) => x.json());
    assert.equal(r.usage.prompt_tokens, tok.count);
    const plain = await client.chat.completions.create({ model: "tiny", messages: question, tools });
    assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens + 20, `${r.usage.prompt_tokens}`);
    assert.equal(plain.choices[0].message.content, "It is sunny in Paris.");  // "auto": the model chose not to call
  });

  await check('"required": the grammar makes the answer a valid call, whole and streamed alike', async () => {
    // The opening ends with `{"name": "`, after which the script alone would write `Paris"}}</tool_call>` (no
    // valid call); the mask only lets it write a tool's name and arguments that follow its parameters schema.
    const r = await client.chat.completions.create({ model: "tiny", messages: question, tools,
                                                     tool_choice: "required", max_tokens: 200 });
    const choice = r.choices[0];
    assert.equal(choice.finish_reason, "tool_calls");
    assert.equal(choice.message.content, null);
    assert.equal(choice.message.tool_calls.length, 1);
    const fn = choice.message.tool_calls[0].function;
    assert.equal(fn.name, "get_weather");
    assert.equal(typeof JSON.parse(fn.arguments).city, "string", fn.arguments);
    const stream = await client.chat.completions.create({ model: "tiny", messages: question, tools,
                                                          tool_choice: "required", max_tokens: 200, stream: true });
    let name = "", args = "";
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        name += d.function?.name && !name ? d.function.name : "";
        args += d.function?.arguments ?? "";
      }
    }
    assert.deepEqual({ name, args }, { name: fn.name, args: fn.arguments });
  });

  await check("bad tool shapes are 400s naming the field", async () => {
    await assert.rejects(
      client.chat.completions.create({ model: "tiny", messages: question, tools,
                                       tool_choice: { type: "function", function: { name: "nope" } } }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === "tool_choice" && /nope/.test(e.message));
    await assert.rejects(
      client.chat.completions.create({ model: "tiny", messages: question, tools: [{ type: "function", function: {} }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === "tools");
  });
} finally {
  const exited = new Promise((resolve) => server.on("exit", (c) => resolve(c)));
  server.kill("SIGTERM");
  await exited;
  rmSync(dir, { recursive: true, force: true });
}
console.log(`${checks} checks passed`);
