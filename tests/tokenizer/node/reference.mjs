// Writes the golden files parallm's tokenizer is compared against, using Hugging Face's tokenizers.js
// (@huggingface/tokenizers, pinned in package-lock.json) as the independent reference.
//
// usage: node reference.mjs CORPUS.jsonl OUT_DIR TOKENIZERS_DIR [name...]
//   For each name (default: qwen3 llama3 gemma3 phi-3 llama2 gpt2-gguf), loads TOKENIZERS_DIR/<name>/tokenizer.json
//   and tokenizer_config.json and writes OUT_DIR/<name>.jsonl, one line per corpus string:
//   {"id": N, "ids": [...], "ids_special": [...], "decoded": "...", "decoded_skip": "..."}
//   ids: encode(text, add_special_tokens=false); ids_special: add_special_tokens=true;
//   decoded / decoded_skip: decode(ids_special) without / with skip_special_tokens.
//   Special-token text in the input is always parsed as special tokens (tokenizers.js has no switch for it).
//   "gpt2-gguf" is GPT-2's tokenizer.json rebuilt from TOKENIZERS_DIR/gguf-vocab/ggml-vocab-gpt-2.gguf (vocabulary
//   and merges from the GGUF, the rest as in openai-community/gpt2's tokenizer.json): no GPT-2 tokenizer.json is
//   available offline, and this checks parallm's GGUF "gpt2" path against tokenizers.js.
import fs from "node:fs";
import path from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";

const [corpusPath, outDir, tokDir, ...names] = process.argv.slice(2);
if (!corpusPath || !outDir || !tokDir) {
  console.error("usage: node reference.mjs CORPUS.jsonl OUT_DIR TOKENIZERS_DIR [name...]");
  process.exit(2);
}
const wanted = names.length ? names : ["qwen3", "llama3", "gemma3", "phi-3", "llama2", "gpt2-gguf"];

// Minimal GGUF v2/v3 metadata reader: returns {key: value} (arrays as JS arrays; no tensors).
function readGgufMetadata(file) {
  const buf = fs.readFileSync(file);
  let off = 0;
  const u32 = () => { const v = buf.readUInt32LE(off); off += 4; return v; };
  const u64 = () => { const v = Number(buf.readBigUInt64LE(off)); off += 8; return v; };
  const str = () => { const n = u64(); const s = buf.toString("utf8", off, off + n); off += n; return s; };
  const value = (type) => {
    switch (type) {
      case 0: return buf.readUInt8(off++);
      case 1: return buf.readInt8(off++);
      case 2: off += 2; return buf.readUInt16LE(off - 2);
      case 3: off += 2; return buf.readInt16LE(off - 2);
      case 4: return u32();
      case 5: off += 4; return buf.readInt32LE(off - 4);
      case 6: off += 4; return buf.readFloatLE(off - 4);
      case 7: return buf.readUInt8(off++) !== 0;
      case 8: return str();
      case 9: { const t = u32(); const n = u64(); const a = new Array(n); for (let i = 0; i < n; ++i) a[i] = value(t); return a; }
      case 10: return u64();
      case 11: off += 8; return Number(buf.readBigInt64LE(off - 8));
      case 12: off += 8; return buf.readDoubleLE(off - 8);
      default: throw new Error(`${file}: unknown GGUF type ${type}`);
    }
  };
  if (buf.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${file}: not GGUF`);
  off = 4;
  u32();  // version
  u64();  // n_tensors
  const nkv = u64();
  const meta = {};
  for (let i = 0; i < nkv; ++i) { const k = str(); meta[k] = value(u32()); }
  return meta;
}

// GPT-2's tokenizer.json layout around the GGUF's vocabulary and merges.
function gpt2FromGguf(file) {
  const meta = readGgufMetadata(file);
  const tokens = meta["tokenizer.ggml.tokens"];
  const types = meta["tokenizer.ggml.token_type"];
  const vocab = {};
  const added = [];
  tokens.forEach((t, i) => {
    if (types[i] === 3) added.push({ id: i, content: t, single_word: false, lstrip: false, rstrip: false, normalized: true, special: true });
    else vocab[t] = i;
  });
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    json: {
      version: "1.0", truncation: null, padding: null, added_tokens: added, normalizer: null,
      pre_tokenizer: byteLevel, post_processor: byteLevel, decoder: byteLevel,
      model: { type: "BPE", dropout: null, unk_token: null, continuing_subword_prefix: "", end_of_word_suffix: "",
               fuse_unk: false, vocab, merges: meta["tokenizer.ggml.merges"] },
    },
    config: { clean_up_tokenization_spaces: false },
  };
}
const corpus = fs
  .readFileSync(corpusPath, "utf8")
  .split("\n")
  .filter((line) => line.length > 0)
  .map((line) => JSON.parse(line));

fs.mkdirSync(outDir, { recursive: true });
for (const name of wanted) {
  let json, config;
  if (name === "gpt2-gguf") {
    ({ json, config } = gpt2FromGguf(path.join(tokDir, "gguf-vocab", "ggml-vocab-gpt-2.gguf")));
  } else {
    const dir = path.join(tokDir, name);
    json = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
    const configPath = path.join(dir, "tokenizer_config.json");
    config = fs.existsSync(configPath) ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
  }
  const tok = new Tokenizer(json, config);
  const decode = (ids, skip) => (ids.length === 0 ? "" : tok.decode(ids, { skip_special_tokens: skip }));
  const lines = [];
  for (const { id, text } of corpus) {
    const ids = tok.encode(text, { add_special_tokens: false }).ids;
    const idsSpecial = tok.encode(text, { add_special_tokens: true }).ids;
    lines.push(
      JSON.stringify({
        id,
        ids,
        ids_special: idsSpecial,
        decoded: decode(idsSpecial, false),
        decoded_skip: decode(idsSpecial, true),
      }),
    );
  }
  fs.writeFileSync(path.join(outDir, `${name}.jsonl`), lines.join("\n") + "\n");
  console.log(`${name}: ${corpus.length} strings -> ${path.join(outDir, name + ".jsonl")}`);
}
