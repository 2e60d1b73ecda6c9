// Checks tests/chat/interpreter_cases.json against @huggingface/jinja: every case renders to its `output` (or
// fails when it says `error`), and every `extension` case is indeed rejected by the reference.
//   node tests/chat/node/check_cases.mjs        (exit status 1 on any disagreement)
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";

const chatDir = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const doc = JSON.parse(readFileSync(join(chatDir, "interpreter_cases.json"), "utf8"));
const { year, month, day, hour, minute } = doc.fixed_now;
const RealDate = Date;
const fixed = new RealDate(year, month - 1, day, hour, minute);
globalThis.Date = class extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(fixed.getTime());
    else super(...args);
  }
};

let failures = 0;
for (const c of doc.cases) {
  let output, error;
  try {
    output = new Template(c.template).render(structuredClone(c.context ?? {}));
  } catch (e) {
    error = String(e.message ?? e);
  }
  let problem = null;
  if (c.extension) {
    if (error === undefined) problem = `extension case renders in the reference: ${JSON.stringify(output)}`;
  } else if (c.error) {
    if (error === undefined) problem = `expected an error, the reference rendered ${JSON.stringify(output)}`;
  } else if (error !== undefined) {
    problem = `the reference failed: ${error}`;
  } else if (output !== c.output) {
    problem = `expected ${JSON.stringify(c.output)}\n   reference ${JSON.stringify(output)}`;
  }
  if (problem) {
    ++failures;
    console.log(`MISMATCH ${c.name}: ${problem}`);
  }
}
console.log(`check_cases.mjs: ${doc.cases.length - failures}/${doc.cases.length} interpreter cases agree with @huggingface/jinja`);
process.exit(failures ? 1 : 0);
