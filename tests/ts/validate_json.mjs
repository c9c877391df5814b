// Checks JSON documents against a published JSON Schema (draft 2020-12, or draft-07 as the MCP
// Registry's) with Ajv, a validator independent of the Rust code that wrote both:
// `node validate_json.mjs SCHEMA FILE...`.
// Prints each document's errors and exits 1 if any fails; 2 if it cannot run.
import { readFileSync } from "node:fs";
import Ajv2020 from "ajv/dist/2020.js";
import Ajv07 from "ajv";
import addFormats from "ajv-formats";

const [schemaPath, ...files] = process.argv.slice(2);
if (!schemaPath || files.length === 0) {
  console.error("usage: node validate_json.mjs SCHEMA FILE...");
  process.exit(2);
}
const schema = JSON.parse(readFileSync(schemaPath, "utf8"));
// The registry's draft-07 schema carries OpenAPI's `example` keyword, which strict mode refuses.
const draft07 = String(schema.$schema ?? "").includes("draft-07");
const ajv = draft07 ? new Ajv07({ allErrors: true, strict: false }) : new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
// schemars names the width of integers; Ajv knows no such formats.
const unsigned = (bits) => (n) => Number.isSafeInteger(n) && n >= 0 && (bits > 52 || n < 2 ** bits);
ajv.addFormat("uint32", { type: "number", validate: unsigned(32) });
ajv.addFormat("uint64", { type: "number", validate: unsigned(64) });
const validate = ajv.compile(schema);
let failed = 0;
for (const file of files) {
  if (!validate(JSON.parse(readFileSync(file, "utf8")))) {
    failed += 1;
    console.error(`${file}: ${ajv.errorsText(validate.errors, { separator: "; " })}`);
  }
}
console.log(`${files.length - failed} of ${files.length} valid against ${schemaPath}`);
process.exit(failed ? 1 : 0);
