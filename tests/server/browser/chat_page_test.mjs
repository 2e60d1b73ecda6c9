// `parallm serve`'s chat page (GET /) in headless Chromium, driven by puppeteer-core: it loads and names the model;
// a message with a system prompt, temperature and max tokens is sent as the page's settings say and the reply
// streams in (the text grows over several reads) with tokens per second shown; the conversation carries its
// history; Stop cancels a long reply at once (the server counts it aborted and frees it); an error is shown; and
// every request the page makes goes to the server that served it.
// Usage: node chat_page_test.mjs CHROMIUM PARALLM_BINARY FIXTURES_DIR   (PARALLM_SCREENSHOT=file.png: a screenshot)
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import assert from "node:assert/strict";
import puppeteer from "puppeteer-core";
import { startServer } from "../node/start_server.mjs";

const [chromium, binary, fixtures] = process.argv.slice(2);
const tmp = mkdtempSync(join(tmpdir(), "parallm-chat-page-"));
const model = join(tmp, "q3.gguf");
const made = spawnSync(binary, ["make-model", "--arch", "qwen3", "--dtype", "q8_0", "--tokenizer",
                                join(fixtures, "tokenizers", "qwen3"), "-o", model], { encoding: "utf8" });
assert.equal(made.status, 0, made.stderr);

const { server, port } = await startServer(binary, ["-m", model, "--served-model-name", "tiny", "--kv-cache-gb", "0.25",
                                                     "-t", "1"]);
const base = `http://127.0.0.1:${port}`;

async function metric(name, labels = "") {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name}{${labels}`));
  assert.ok(line, `${name}{${labels}...} is not on /metrics`);
  return Number(line.split(" ").pop());
}

let describe = async () => "";  // the page's state, once there is a page
async function until(what, predicate, timeoutMs = 30000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await predicate();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; the page shows: ${await describe()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

let checks = 0;
async function check(name, fn) {
  await fn();
  ++checks;
  console.log(`ok   ${name}`);
}

const browser = await puppeteer.launch({
  executablePath: chromium, headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1000, height: 640 });
  const requests = [];
  page.on("request", (r) => requests.push({ url: r.url(), method: r.method(), body: r.postData() }));
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  const lastReply = () => page.evaluate(() => {
    const all = document.querySelectorAll(".message.assistant");
    const last = all[all.length - 1];
    return last ? last.firstChild?.textContent ?? "" : null;
  });
  const idle = () => page.evaluate(() => !document.getElementById("send").disabled);
  const replies = () => page.evaluate(() => document.querySelectorAll(".message.assistant").length);
  // What the page shows, for failure messages.
  describe = () => page.evaluate(() => [...document.querySelectorAll(".message, #stats")].map(
    (e) => `${e.className || e.id}: ${e.textContent.slice(0, 80)}`).join(" | "));

  await check("the page loads from the binary and names the model", async () => {
    const response = await page.goto(base + "/", { waitUntil: "load" });
    assert.equal(response.status(), 200);
    assert.match(response.headers()["content-type"], /^text\/html/);
    assert.match(response.headers()["content-security-policy"], /connect-src 'self'/);
    assert.equal(await page.title(), "parallm chat");
    await until("the model name", async () => (await page.$eval("#model", (e) => e.textContent)).startsWith("tiny"));
  });

  const generatedBefore = await metric("vllm:generation_tokens_total");
  await check("send: the settings go with the request, the reply streams in, tokens per second shown", async () => {
    await page.type("#system", "You are terse.");
    await page.$eval("#temperature", (e) => { e.value = "0"; });
    await page.$eval("#max-tokens", (e) => { e.value = "64"; });
    // Every change of the reply's text is recorded in the page: each network read the page handles is one.
    await page.evaluate(() => {
      window.replyLengths = [];
      new MutationObserver(() => {
        const all = document.querySelectorAll(".message.assistant");
        if (all.length) window.replyLengths.push(all[all.length - 1].textContent.length);
      }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
    });
    await page.type("#input", "Hello there");
    await page.click("#send");
    await until("the reply to finish", async () => (await replies()) === 1 && (await idle()));
    const lengths = new Set(await page.evaluate(() => window.replyLengths.filter((n) => n > 0)));
    const sent = requests.filter((r) => r.url.endsWith("/v1/chat/completions"));
    assert.equal(sent.length, 1);
    const body = JSON.parse(sent[0].body);
    assert.deepEqual(body.messages, [{ role: "system", content: "You are terse." }, { role: "user", content: "Hello there" }]);
    assert.equal(body.temperature, 0);
    assert.equal(body.max_tokens, 64);
    assert.equal(body.stream, true);
    assert.ok(lengths.size >= 3, `the reply did not stream: lengths seen ${[...lengths]}`);
    const stats = await page.$eval("#stats", (e) => e.textContent);
    const m = stats.match(/^(\d+) tokens, ([\d.]+) tokens\/s, (\d+) ms to first token, finish: (length|stop)$/);
    assert.ok(m, `stats: ${stats}`);
    // The page's token count is the server's usage: what the engine generated for this request.
    const generated = (await metric("vllm:generation_tokens_total")) - generatedBefore;
    assert.equal(Number(m[1]), generated);
    assert.ok(Number(m[2]) > 0);
    console.log(`     ${stats}`);
  });

  await check("the conversation carries its history", async () => {
    await page.$eval("#max-tokens", (e) => { e.value = "4"; });
    await page.type("#input", "And again?");
    await page.click("#send");
    await until("the second reply", async () => (await replies()) === 2 && (await idle()));
    await until("the second reply's stats", async () => (await page.$$(".note")).length === 2);
    const sent = requests.filter((r) => r.url.endsWith("/v1/chat/completions"));
    const body = JSON.parse(sent[1].body);
    assert.deepEqual(body.messages.map((x) => x.role), ["system", "user", "assistant", "user"]);
    assert.equal(body.messages[3].content, "And again?");
  });

  await check("stop cancels a long reply at once; the server frees it", async () => {
    const abortedBefore = await metric("vllm:request_success_total", 'finished_reason="abort"');
    // Long enough to run for seconds, short enough to fit the context with the conversation so far.
    await page.$eval("#max-tokens", (e) => { e.value = "1500"; });
    await page.type("#input", "Tell me a long story");
    // Stop is pressed from inside the page the moment the first text shows: a click through the input pipeline can
    // lag by seconds on a busy machine, and the reply might be over by then.
    const stopping = page.evaluate(() => new Promise((resolve) => {
      const observer = new MutationObserver(() => {
        const all = document.querySelectorAll(".message.assistant");
        if (all.length === 3 && all[2].textContent.length > 0) {
          observer.disconnect();
          document.getElementById("stop").click();
          resolve();
        }
      });
      observer.observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true });
    }));
    await page.click("#send");
    await stopping;
    await until("the page to stop", async () => (await page.$eval("#stats", (e) => e.textContent)).endsWith("stopped"));
    const atStop = await lastReply();
    await until("the server to count it aborted", async () =>
      (await metric("vllm:request_success_total", 'finished_reason="abort"')) === abortedBefore + 1, 10000);
    assert.equal(await metric("vllm:num_requests_running"), 0);
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(await lastReply(), atStop, "the reply grew after Stop");
    console.log(`     stopped after ${atStop.length} characters`);
  });

  if (process.env.PARALLM_SCREENSHOT) {
    await page.$eval("#max-tokens", (e) => { e.value = "24"; });
    await page.type("#input", "What is parallm?");
    await page.click("#send");
    await until("the reply", idle);
    await page.screenshot({ path: process.env.PARALLM_SCREENSHOT });
    console.log(`     wrote ${process.env.PARALLM_SCREENSHOT}`);
  }

  await check("an error is shown, not swallowed", async () => {
    await page.$eval("#temperature", (e) => { e.value = "-1"; });
    await page.type("#input", "x");
    await page.click("#send");
    await until("the error", async () => (await page.$$(".message.error")).length === 1);
    assert.match(await page.$eval(".message.error", (e) => e.textContent), /^Error: .*temperature/);
  });

  await check("every request stays on this server; no script error", async () => {
    assert.ok(requests.length >= 5);
    for (const r of requests) assert.ok(r.url.startsWith(base + "/"), `request to ${r.url}`);
    assert.deepEqual(pageErrors, []);
  });
} finally {
  await browser.close();
  const exited = new Promise((resolve) => server.on("exit", (c) => resolve(c)));
  server.kill("SIGTERM");
  const code = await exited;
  rmSync(tmp, { recursive: true, force: true });
  assert.equal(code, 0, "SIGTERM must exit 0");
}
console.log(`chat_page_test.mjs: all ${checks} checks passed in headless ${chromium}`);
