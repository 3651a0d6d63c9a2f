import { cutText } from "../../errors/cut-text.ts";
import { isFiniteNumber } from "./number-bounds.ts";
import { isRecord, isSchema } from "./read-schema-types.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * The largest length or count enforced. llama.cpp's grammar parser refuses a repetition whose
 * count times the symbols it repeats passes 2000 (`MAX_REPETITION_THRESHOLD`): a string's
 * character repeats two, so `maxLength` 1001 was refused with a parse error (an array's items
 * went to 1001).
 */
const maxGrammarRepetitions = 1000;

const typeNames = new Set(["string", "number", "integer", "boolean", "null", "object", "array"]);

/** Refuses the keywords the conversion reads when they cannot mean anything (see the module comment of convert-json-schema-to-gbnf.ts). */
export function checkKeywords(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): void {
  const { type } = schema;
  if (type !== undefined) {
    const names = Array.isArray(type) ? type : [type];
    const unknown = names.find((name) => typeof name !== "string" || !typeNames.has(name));
    if (names.length === 0 || unknown !== undefined) {
      conversion.refuse(
        at,
        `'type' ${names.length === 0 ? "is an empty array" : `has ${describe(unknown)}`}, which is not a JSON Schema type (${[...typeNames].join(", ")}).`,
      );
    }
    if (names.length > typeNames.size) {
      conversion.refuse(at, "'type' names a type more than once: its names must be unique.");
    }
  }
  if (Array.isArray(schema.required)) conversion.budget.spend(at, "steps", schema.required.length);
  if (
    "required" in schema &&
    (!Array.isArray(schema.required) || !schema.required.every((name) => typeof name === "string"))
  ) {
    conversion.refuse(
      at,
      `'required' must be an array of property names (strings), not ${describe(schema.required)}.`,
    );
  }
  for (const keyword of ["properties", "$defs", "definitions"]) {
    if (keyword in schema && !isRecord(schema[keyword])) {
      conversion.refuse(
        at,
        `'${keyword}' must be an object of schemas by name, not ${describe(schema[keyword])}.`,
      );
    }
  }
  for (const keyword of ["enum", "anyOf", "oneOf", "allOf"]) {
    const value = schema[keyword];
    if (keyword in schema && (!Array.isArray(value) || value.length === 0)) {
      conversion.refuse(at, `'${keyword}' must be a non-empty array, not ${describe(value)}.`);
    }
  }
  // `anyOf` and `oneOf` branches are checked as they are converted; `allOf` ones are merged.
  const allOf: unknown[] = Array.isArray(schema.allOf) ? schema.allOf : [];
  conversion.budget.spend(at, "steps", allOf.length);
  const notSchema = allOf.findIndex((branch) => !isSchema(branch));
  if (notSchema !== -1) {
    conversion.refuse(
      child(at, "allOf", String(notSchema)),
      `a schema must be an object or a boolean, not ${describe(allOf[notSchema])}.`,
    );
  }
  if ("prefixItems" in schema && !Array.isArray(schema.prefixItems)) {
    conversion.refuse(at, `'prefixItems' must be an array of schemas, not ${describe(schema.prefixItems)}.`);
  }
  if ("items" in schema && !isSchema(schema.items) && !Array.isArray(schema.items)) {
    conversion.refuse(
      at,
      `'items' must be a schema (an object or a boolean), not ${describe(schema.items)}.`,
    );
  }
  if ("additionalProperties" in schema && !isSchema(schema.additionalProperties)) {
    conversion.refuse(
      at,
      `'additionalProperties' must be a schema (an object or a boolean), not ${describe(schema.additionalProperties)}.`,
    );
  }
  if ("$ref" in schema && typeof schema.$ref !== "string") {
    conversion.refuse(at, `'$ref' must be a string, not ${describe(schema.$ref)}.`);
  }
  checkValueKeywords(conversion, schema, at);
}

/**
 * Refuses the number, string and format keywords whose value cannot mean anything: they were
 * ignored, so `{"type": "number", "minimum": "3"}` let the model write any number, and a
 * malformed `pattern` any string, where the client expected its keyword enforced.
 */
function checkValueKeywords(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): void {
  for (const keyword of ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]) {
    const value = schema[keyword];
    if (value === undefined || isFiniteNumber(value)) continue;
    // Draft 4's `exclusiveMinimum: true` makes its `minimum` exclusive.
    if (keyword.startsWith("exclusive") && typeof value === "boolean") continue;
    conversion.refuse(at, `'${keyword}' must be a number, not ${describe(value)}.`);
  }
  if ("multipleOf" in schema && !(isFiniteNumber(schema.multipleOf) && schema.multipleOf > 0)) {
    conversion.refuse(
      at,
      `'multipleOf' must be a number greater than 0, not ${describe(schema.multipleOf)}.`,
    );
  }
  for (const keyword of ["pattern", "format"]) {
    if (keyword in schema && typeof schema[keyword] !== "string") {
      conversion.refuse(at, `'${keyword}' must be a string, not ${describe(schema[keyword])}.`);
    }
  }
  if (typeof schema.pattern === "string") {
    const problem = describeInvalidPattern(schema.pattern);
    if (problem !== undefined)
      conversion.refuse(at, `'pattern' is not a regular expression (ECMA-262): ${problem}.`);
  }
}

/**
 * Why `pattern` is no regular expression, or `undefined` when it is one: read with the `u` flag
 * (as JSON Schema reads patterns), or else without it, as the browsers' lenient syntax takes
 * escapes such as `\-` that the flag refuses (and pydantic and others write).
 */
function describeInvalidPattern(pattern: string): string | undefined {
  try {
    new RegExp(pattern, "u");
    return undefined;
  } catch {
    // Not with the flag: perhaps without it.
  }
  try {
    new RegExp(pattern);
    return undefined;
  } catch (error) {
    // V8's message quotes the whole pattern: only what is wrong is kept.
    const message = error instanceof Error ? error.message : String(error);
    return message.slice(message.lastIndexOf(": ") + 2);
  }
}

/**
 * A count keyword (`minLength`, `maxItems`, ...), or `undefined` without one. Counts above
 * {@link maxGrammarRepetitions} are refused: llama.cpp's grammar parser rejects such repetitions,
 * so the schema could not be enforced.
 */
export function readBound(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  keyword: string,
  at: Position,
  /** Whether the count goes into the grammar (not beside a `format` that fixes the length). */
  enforced = true,
): number | undefined {
  const count = readCount(schema[keyword]);
  if (count === undefined && schema[keyword] !== undefined) {
    conversion.refuse(
      at,
      `'${keyword}' is ${describe(schema[keyword])}; it must be a whole number, 0 or more.`,
    );
  }
  if (count !== undefined && count > maxGrammarRepetitions && conversion.grammarLimits && enforced) {
    conversion.refuse(
      at,
      `'${keyword}' is ${count}, above ${maxGrammarRepetitions}, the largest length or count the output grammar can enforce. Lower it to ${maxGrammarRepetitions} or less, or remove it.`,
    );
  }
  return count;
}

/** Refuses a lower bound above its upper bound: no value meets the schema, and the grammar would emit one that breaks it. */
export function checkRange(
  conversion: SchemaConversion,
  at: Position,
  minimumKeyword: string,
  minimum: number | undefined,
  maximumKeyword: string,
  maximum: number | undefined,
): void {
  if (minimum === undefined || maximum === undefined || minimum <= maximum) return;
  conversion.refuseNoValue(
    at,
    `'${minimumKeyword}' (${minimum}) is greater than '${maximumKeyword}' (${maximum}), so no value can match. Make the minimum at most the maximum.`,
  );
}

function readCount(value: unknown): number | undefined {
  return Number.isInteger(value) && (value as number) >= 0 ? (value as number) : undefined;
}

/** A short description of a value for a message: its JSON, cut, or its kind. */
export function describe(value: unknown): string {
  const text = JSON.stringify(value);
  if (text === undefined) return typeof value;
  return text.length > 40 ? `${cutText(text, 40)}...` : text;
}
