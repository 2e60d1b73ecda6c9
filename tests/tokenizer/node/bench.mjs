// Times the reference tokenizer (Hugging Face tokenizers.js, @huggingface/tokenizers) encoding text files, so
// `parallm bench tokenize --reference` can put parallm's figures beside it. Prints one JSON object on stdout.
//
// usage: node bench.mjs TOKENIZER_JSON [--repeats N] TEXT_FILE [TEXT_FILE...]
//   For each file (read as UTF-8): a fresh Tokenizer encodes it once ("cold": the word cache starts empty),
//   then the same Tokenizer encodes it N more times ("warm": the best of them; the cold time when N is 0). Encoding is
//   encode(text, {add_special_tokens: false}), as parallm's Encode(text, false, false) on text without
//   special-token text. Output:
//   {"reference": "@huggingface/tokenizers", "version", "node", "load_ms",
//    "files": [{"path", "bytes", "tokens", "cold_ms", "warm_ms"}]}
import fs from "node:fs";
import { fileURLToPath } from "node:url";
import { Tokenizer } from "@huggingface/tokenizers";

const args = process.argv.slice(2);
let repeats = 3;
const files = [];
let tokenizerPath;
for (let i = 0; i < args.length; ++i) {
  if (args[i] === "--repeats") repeats = Math.max(0, parseInt(args[++i], 10) || 0);
  else if (tokenizerPath === undefined) tokenizerPath = args[i];
  else files.push(args[i]);
}
if (!tokenizerPath || files.length === 0) {
  console.error("usage: node bench.mjs TOKENIZER_JSON [--repeats N] TEXT_FILE [TEXT_FILE...]");
  process.exit(2);
}

const packageJson = fileURLToPath(new URL("node_modules/@huggingface/tokenizers/package.json", import.meta.url));
const version = fs.existsSync(packageJson) ? JSON.parse(fs.readFileSync(packageJson, "utf8")).version : "unknown";
const json = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const configPath = tokenizerPath.replace(/tokenizer\.json$/, "tokenizer_config.json");
const config = configPath !== tokenizerPath && fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};

let start = performance.now();
new Tokenizer(json, config);
const loadMs = performance.now() - start;

const results = [];
for (const path of files) {
  const text = fs.readFileSync(path, "utf8");
  const tok = new Tokenizer(json, config);
  start = performance.now();
  const ids = tok.encode(text, { add_special_tokens: false }).ids;
  const coldMs = performance.now() - start;
  let warmMs = repeats > 0 ? Infinity : coldMs;
  for (let r = 0; r < repeats; ++r) {
    start = performance.now();
    tok.encode(text, { add_special_tokens: false });
    warmMs = Math.min(warmMs, performance.now() - start);
  }
  results.push({ path, bytes: Buffer.byteLength(text, "utf8"), tokens: ids.length, cold_ms: coldMs, warm_ms: warmMs });
}
console.log(JSON.stringify({ reference: "@huggingface/tokenizers", version, node: process.version, load_ms: loadMs, files: results }));
