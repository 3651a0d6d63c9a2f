import type { GbnfJsonSchema } from "node-llama-cpp";
import { checkGrammarStacks } from "./check-grammar-stacks.ts";
import type { SharedBudget } from "./schema-conversion-budget.ts";
import { SchemaConverter } from "./schema-converter.ts";

/**
 * Converts a client's JSON Schema to the subset node-llama-cpp turns into a grammar
 * (`GbnfJsonSchema`), so that every valid schema a client sends works and every output the grammar
 * allows still validates against the client's schema wherever the subset can say so.
 *
 * A schema that is clearly invalid is refused with 400 `invalid_value` whose `param` is
 * `options.param` and whose message names the place (a JSON pointer) and the problem, as OpenAI
 * refuses it, instead of being taken for the empty schema: a schema that is not an object or a
 * boolean; a `type` that is not one of the seven type names (or a list of them); `required` that is
 * not an array of strings; `properties`, `$defs` or `definitions` that are not objects; `enum`,
 * `anyOf`, `oneOf` or `allOf` that are not non-empty arrays, `prefixItems` that is not an array;
 * `items` or `additionalProperties` that are not schemas; a `$ref` that does not resolve within the
 * schema. Only the schemas the conversion reaches are checked (not unused `$defs`, nor what sits
 * under dropped keywords such as `not`).
 *
 * The subset has no "any value", no `anyOf`/`allOf`, no `pattern`, no numeric ranges, no `uuid`
 * format, no `nullable`, and an object emits every declared property, in order. So:
 * - `{}`, `true` and schemas without a type become "any JSON value" (lengths imply a string,
 *   `properties`, `required` or property counts an object, `items` or item counts an array);
 *   `false` becomes `null` (it cannot say "nothing").
 * - `allOf` is merged into one schema, each keyword as all branches must hold (types, constants
 *   and ranges intersected, required names gathered, a property or item several declare an
 *   `allOf` of their schemas, names one branch does not declare held to its
 *   `additionalProperties`; see intersect-schema-keywords.ts), a `$ref` branch as the schema it
 *   points at, unless that is being converted (a cycle: it stays a reference).
 * - `anyOf` and `oneOf` become `oneOf`, each branch merged as `allOf` is with the keywords beside
 *   it (`anyOf` beside `oneOf`: both hold). A branch that no value meets beside them (no type in
 *   common, no constant in common, a minimum above a maximum, `false`, ...) is left out; the
 *   schema is refused only when every branch is. Whether `oneOf` matches only one is not enforced.
 *   A `$ref` branch is merged as the schema it points at, except one that leads back into a
 *   schema being converted (a cycle): it stays a reference, which the keywords beside it do not
 *   narrow.
 *   `type: [a, b]` and `nullable` become a `oneOf` of each type.
 * - `$ref` to any JSON pointer within the schema (`#`, `#/$defs/X`, `#/definitions/X`,
 *   `#/properties/a`) becomes a `$defs` reference (keywords beside it are dropped); other
 *   references (URLs, anchors) are refused.
 * - Objects with `properties` emit exactly those (optional ones too, which is valid; no others,
 *   which is a valid subset even where `additionalProperties` allows more), so
 *   `{"type": "object", "properties": {}}` is `{}`. Objects without `properties` are maps: any
 *   keys, values per `additionalProperties` (any value by default, as JSON Schema says). Required
 *   properties that are not declared are added as `additionalProperties`' schema, or as "any
 *   JSON value" where it gives none. A tuple (`prefixItems`) is emitted whole, up to `maxItems`.
 * - For a grammar, what has no finite value (`{"$ref": "#"}` in the root's `properties`) is left
 *   out where it is an optional property or one of several alternatives, and refused where it is
 *   required or the only alternative (see schema-finite-values.ts): the model could write it until
 *   the context is full.
 * - Refused too, as no value meets them: a minimum above its maximum (`minLength` over
 *   `maxLength`, and the like for items, properties and numbers; an integer range with no
 *   integer in it), a `const` that is not of the `type` beside it or does not meet the other keywords
 *   there, an `enum` none of whose values does, `allOf` branches with nothing in common, and a
 *   required property that `properties` does not declare beside `additionalProperties: false`,
 *   more required properties than `maxProperties`, and a `minProperties` above the properties
 *   `additionalProperties: false` allows.
 *   Refused as invalid: a length or count that is not a whole number, 0 or more. Refused for a
 *   grammar only: lengths or counts above 1000, which llama.cpp's grammar parser does not take,
 *   and lengths beside a `format` it enforces that leave out some of the lengths the format's
 *   grammar writes (`date` is 10 characters, `time` 8 or 12, `date-time` 20 or 24), as it writes the format whole. `enum` values that do not meet the `type` and other
 *   keywords beside them are dropped.
 * - Enforced: `type`, `properties`, `required` (as every property is emitted), `additionalProperties`
 *   of maps, `items`, `prefixItems`, `minItems`/`maxItems`, `minLength`/`maxLength`,
 *   `minProperties`/`maxProperties` of maps (beside `properties`: `maxProperties` by leaving out
 *   the last optional ones; see convert-typed-schema.ts), `enum`, `const`, `format` `date-time`, `date`,
 *   `time` and `uuid`, an integer's `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`
 *   (`uuid` and ranges as `$defs` of grammars of our own: see patch-grammar-definitions.ts), and
 *   constants meet the keywords beside them (see constant-meets-keywords.ts). A string's
 *   `pattern` is such a grammar too, where one can be written (see pattern-grammar.ts).
 * - Other `pattern`s, other `format`s, a fractional number's `minimum`/`maximum`, `multipleOf` (`const`/`enum`
 *   values are checked against both), `uniqueItems`, `not`,
 *   `if`/`then`, `dependentSchemas` and the like are dropped: the output may not meet them.
 * - `const` and `enum` of objects or arrays become exact object and array schemas.
 *
 * The work is bounded whatever the schema (see schema-conversion-budget.ts): what the conversion writes out
 * (properties, `enum` values, the members of constants), the steps it takes (an `anyOf` branch
 * repeats its siblings, so a schema of a few hundred bytes could take exponentially many) and,
 * for a grammar, the characters it writes (names, constants, descriptions). For a grammar, the
 * converted schema is refused too where llama.cpp would keep more than 2000 alternatives open at
 * once, or where a `$ref` leads back to itself with nothing in between (see check-grammar-stacks.ts).
 */
export function convertJsonSchemaToGbnf(
  schema: unknown,
  options: {
    param: string;
    /**
     * Whether to refuse what is valid JSON Schema but beyond what a llama.cpp grammar can
     * enforce: counts above 1000 and references that are not JSON pointers within the schema (a
     * URL, an anchor). Default `true`; `false` checks validity alone, as for a schema that goes
     * to an upstream server, which enforces it its own way.
     */
    grammarLimits?: boolean;
    /** Spent too, with other conversions (a request's tools, see createToolsBudget). */
    shared?: SharedBudget;
  },
): GbnfJsonSchema {
  const converter = new SchemaConverter(schema, options.param, options.grammarLimits ?? true, options.shared);
  const converted = converter.convert(schema, { depth: 0, pointer: () => "#" });
  const defs = converter.convertedDefinitions();
  if (converter.grammarLimits) converter.keepFinite(converted, defs);
  const result = withDefinitions(converted, defs);
  if (converter.grammarLimits) checkGrammarStacks(result, options.param);
  return result;
}

/** `$defs` sit on the root; a root that is not an object, array or oneOf is wrapped in a oneOf. */
function withDefinitions(converted: GbnfJsonSchema, defs: Record<string, GbnfJsonSchema>): GbnfJsonSchema {
  if (Object.keys(defs).length === 0) return converted;
  if (
    "oneOf" in converted ||
    ("type" in converted && (converted.type === "object" || converted.type === "array"))
  ) {
    return { ...converted, $defs: defs } as GbnfJsonSchema;
  }
  return { oneOf: [converted], $defs: defs };
}
