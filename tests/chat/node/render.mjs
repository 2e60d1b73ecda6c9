// Renders every (template, conversation) pair of tests/chat/conversations.json with @huggingface/jinja, the
// reference parallm's chat templates must match, into one golden JSON file per template.
//
//   node tests/chat/node/render.mjs [--out DIR]     (default DIR: tests/chat/golden)
//
// Fixtures are read from $PARALLM_FIXTURES, else ../shared next to the repository. strftime_now() is made
// deterministic by freezing `new Date()` at conversations.json's `fixed_now` (a local time).
import { readFileSync, writeFileSync, mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const here = dirname(fileURLToPath(import.meta.url));
const chatDir = resolve(here, "..");
const repo = resolve(chatDir, "../..");
const fixtures = process.env.PARALLM_FIXTURES || resolve(repo, "../shared");
const outIndex = process.argv.indexOf("--out");
const outDir = outIndex > 0 ? resolve(process.argv[outIndex + 1]) : join(chatDir, "golden");

const jinjaVersion = JSON.parse(readFileSync(join(here, "node_modules/@huggingface/jinja/package.json"), "utf8")).version;
const doc = JSON.parse(readFileSync(join(chatDir, "conversations.json"), "utf8"));

// Freeze the clock for strftime_now(): only `new Date()` without arguments is affected.
const { year, month, day, hour, minute } = doc.fixed_now;
const RealDate = Date;
const fixed = new RealDate(year, month - 1, day, hour, minute);
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixed.getTime());
    else super(...args);
  }
  static now() {
    return fixed.getTime();
  }
};
// The reference formats %b/%B with the default locale; parallm uses English month names.
const shortMonth = new Intl.DateTimeFormat(undefined, { month: "short" }).format(fixed);
if (shortMonth !== fixed.toLocaleString("en-US", { month: "short" })) {
  console.error(`render.mjs: the default locale formats months as '${shortMonth}'; run with LC_ALL=C or en_US`);
  process.exit(1);
}

function specialToken(config, key) {
  const v = config[key];
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof v.content === "string") return v.content;
  return null;
}

function chatTemplateOf(config) {
  const t = config.chat_template;
  if (typeof t === "string") return t;
  if (Array.isArray(t)) return (t.find((x) => x.name === "default") ?? t[0]).template;
  throw new Error("no chat_template");
}

mkdirSync(outDir, { recursive: true });
let pairs = 0;
let errors = 0;
for (const tmpl of doc.templates) {
  let source, tokenConfig;
  if (tmpl.config) {
    tokenConfig = JSON.parse(readFileSync(join(fixtures, tmpl.config), "utf8"));
    source = chatTemplateOf(tokenConfig);
  } else {
    source = readFileSync(join(fixtures, tmpl.file), "utf8");
    if (tmpl.tokens_from) tokenConfig = JSON.parse(readFileSync(join(fixtures, tmpl.tokens_from), "utf8"));
  }
  const tokens = {};
  for (const key of ["bos_token", "eos_token"]) {
    const value = tokenConfig ? specialToken(tokenConfig, key) : (tmpl[key] ?? null);
    if (value !== null) tokens[key] = value;
  }

  let parsed = null;
  let parseError = null;
  try {
    parsed = new Template(source);
  } catch (e) {
    parseError = String(e.message ?? e);
  }
  const results = {};
  for (const conv of doc.conversations) {
    const context = { messages: conv.messages, add_generation_prompt: conv.add_generation_prompt };
    if (conv.tools) context.tools = conv.tools;
    Object.assign(context, tokens, conv.extra ?? {});
    ++pairs;
    if (parseError !== null) {
      results[conv.name] = { error: parseError };
      ++errors;
      continue;
    }
    try {
      results[conv.name] = { output: parsed.render(structuredClone(context)) };
    } catch (e) {
      results[conv.name] = { error: String(e.message ?? e) };
      ++errors;
    }
  }
  const golden = { template: tmpl.name, reference: `@huggingface/jinja ${jinjaVersion}`, results };
  writeFileSync(join(outDir, `${tmpl.name}.json`), JSON.stringify(golden, null, 2) + "\n");
}
console.log(`render.mjs: ${doc.templates.length} templates x ${doc.conversations.length} conversations = ${pairs} pairs ` +
  `(${errors} expected errors) -> ${outDir}`);
