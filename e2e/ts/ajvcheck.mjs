// ajvcheck.mjs reads from stdin a JSON list of {schema, values} and
// prints, for each, what three Ajv validators say of each value:
//   sdk:     the TypeScript SDK's own (AjvJsonSchemaValidator: Ajv's
//            draft-07 class with ajv-formats), as clients check results;
//   a2020:   Ajv2020 with ajv-formats, the same options (JSON Schema
//            2020-12, MCP's default dialect);
//   lenient: Ajv2020 without format assertion (Crank's reading of
//            arguments).
// A schema a validator cannot compile gets {error} instead of a list.
// Used by e2e TestValidatorAgreesWithTSClient.
import { AjvJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/ajv";
import Ajv2020Module from "ajv/dist/2020.js";
import addFormatsModule from "ajv-formats";

const Ajv2020 = Ajv2020Module.default ?? Ajv2020Module;
const addFormats = addFormatsModule.default ?? addFormatsModule;
const options = { strict: false, validateSchema: false, allErrors: true };

function run(compile, schema, values) {
  let validate;
  try {
    validate = compile(schema);
  } catch (e) {
    return { error: String(e.message ?? e) };
  }
  return values.map((v) => validate(v));
}

const input = JSON.parse(await new Promise((resolve) => {
  let data = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (c) => (data += c));
  process.stdin.on("end", () => resolve(data));
}));

const out = input.map(({ schema, values }) => {
  // A fresh validator per schema: no $id of one schema meets another's.
  const sdk = new AjvJsonSchemaValidator();
  const a2020 = new Ajv2020({ ...options, validateFormats: true });
  addFormats(a2020);
  const lenient = new Ajv2020({ ...options, validateFormats: false });
  return {
    sdk: run((s) => { const v = sdk.getValidator(s); return (x) => v(x).valid; }, schema, values),
    a2020: run((s) => a2020.compile(s), schema, values),
    lenient: run((s) => lenient.compile(s), schema, values),
  };
});
process.stdout.write(JSON.stringify(out));
