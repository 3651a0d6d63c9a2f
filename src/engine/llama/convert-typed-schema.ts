import type { GbnfJsonSchema } from "node-llama-cpp";
import { shownValue } from "../../errors/shown-value.ts";
import { checkRange, readBound } from "./check-schema-keywords.ts";
import { convertNumberRange } from "./convert-number-range.ts";
import { convertStringPattern } from "./convert-string-pattern.ts";
import { formatPatterns } from "./format-patterns.ts";
import { largestGrammarInteger } from "./integer-range-grammar.ts";
import { boundsAreEmpty, describeNumberBounds, readNumberBounds } from "./number-bounds.ts";
import { hasPatternProperties, isRecord } from "./read-schema-types.ts";
import { anyValue, type PropertyCounts, type SchemaConversion } from "./schema-conversion.ts";
import { child, type Position } from "./schema-position.ts";

/**
 * The formats a grammar enforces, and the lengths of the strings their grammar writes
 * (node-llama-cpp's, as patch-grammar-terminals.ts leaves them: a time `HH:MM:SS`, optional
 * `.sss`, without a zone; a date `YYYY-MM-DD`; a date-time both, `T` between, ending in `Z`; ours:
 * a UUID, 8-4-4-4-12 hex digits).
 */
const formatLengths: Record<string, readonly number[] | undefined> = Object.assign(Object.create(null), {
  date: [10],
  time: [8, 12],
  "date-time": [20, 24],
  uuid: [36],
});

/** The schema of one of the types `schema` allows, with the keywords of that type. */
export function convertTypedSchema(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  type: string,
  at: Position,
): GbnfJsonSchema {
  switch (type) {
    case "object":
      return convertObject(conversion, schema, at);
    case "array":
      return convertArray(conversion, schema, at);
    case "string": {
      const format = typeof schema.format === "string" ? formatLengths[schema.format] : undefined;
      // Beside a format, whose grammar fixes the length, a length is not written into the grammar.
      const enforced = format === undefined;
      const minLength = readBound(conversion, schema, "minLength", at, enforced);
      const maxLength = readBound(conversion, schema, "maxLength", at, enforced);
      checkRange(conversion, at, "minLength", minLength, "maxLength", maxLength);
      if (format !== undefined) {
        // The grammar writes any of the format's forms: lengths that leave out one of them
        // cannot be enforced (as counts above 1000 cannot), and the model could write it.
        const fits = format.filter((length) => length >= (minLength ?? 0) && length <= (maxLength ?? length));
        if (fits.length < format.length && conversion.grammarLimits) {
          const lengths = `'minLength' and 'maxLength' (${minLength ?? 0} to ${maxLength ?? "any"})`;
          const problem = `'format' '${schema.format}' is written in ${format.join(", ")} characters`;
          if (fits.length === 0)
            conversion.refuseNoValue(
              at,
              `${problem}, which ${lengths} do not allow, so no value can match. Remove the lengths or the format.`,
            );
          conversion.refuse(
            at,
            `${problem}, some of which ${lengths} do not allow: the output grammar can only write the format whole. Allow ${format[0]} to ${format.at(-1)} characters, or remove the lengths or the format.`,
          );
        }
        // node-llama-cpp knows no `uuid` format, nor a `time` without a zone, which zod's readers
        // want (patch-grammar-terminals.ts): its check of a tool call's arguments fails on them. A
        // definition of our own grammar, any string of its lengths to node-llama-cpp's checks.
        if (schema.format === "uuid" || schema.format === "time") {
          const loose = { type: "string", minLength: format[0], maxLength: format.at(-1) } as const;
          return conversion.defineGrammar(schema.format, loose, schema.format, at);
        }
        return { type: "string", format: schema.format as "date-time" | "date" };
      }
      // A format written as a pattern wins over a pattern beside it, as the other formats do.
      const formatPattern = typeof schema.format === "string" ? formatPatterns[schema.format] : undefined;
      const pattern = formatPattern ?? (typeof schema.pattern === "string" ? schema.pattern : undefined);
      if (pattern !== undefined) {
        const what =
          formatPattern === undefined
            ? `'pattern' ${JSON.stringify(pattern)}`
            : `'format' '${schema.format}'`;
        const patterned = convertStringPattern(conversion, { pattern, what }, minLength, maxLength, at);
        if (patterned !== undefined) return patterned;
      }
      return {
        type: "string",
        ...(minLength === undefined ? {} : { minLength }),
        ...(maxLength === undefined ? {} : { maxLength }),
      };
    }
    case "number":
    case "integer":
      // A range no number is in is refused, as one of lengths is: the answer could only break it.
      checkRange(
        conversion,
        at,
        "minimum",
        readNumber(schema.minimum),
        "maximum",
        readNumber(schema.maximum),
      );
      // Exclusive bounds too (`exclusiveMinimum` 5 beside `maximum` 5; an integer's are checked
      // below, as its range is rounded inward).
      if (type === "number") {
        const bounds = readNumberBounds(schema);
        if (boundsAreEmpty(bounds))
          conversion.refuseNoValue(
            at,
            `no number is within its bounds (${describeNumberBounds(bounds)}), so no value can match.`,
          );
      }
      // A range is written into the grammar: an integer's whole, a fractional number's for the
      // numbers of at most 15 significant digits (see decimal-range-grammar.ts).
      if (type === "integer") return convertIntegerRange(conversion, schema, at);
      return convertNumberRange(conversion, schema, at);
    case "boolean":
    case "null":
      return { type };
    default:
      return anyValue;
  }
}

function convertObject(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): GbnfJsonSchema {
  const declared = isRecord(schema.properties) ? schema.properties : undefined;
  const required = Array.isArray(schema.required)
    ? schema.required.filter((name): name is string => typeof name === "string")
    : [];
  // Without a prototype: a property named `__proto__`, `constructor` or `toString` is a key
  // like any other (on `{}` the first set the prototype and the others were found inherited).
  const properties: Record<string, GbnfJsonSchema> = Object.create(null);
  const entries = Object.entries(declared ?? {});
  conversion.budget.spend(at, "entries", entries.length);
  for (const [name, property] of entries) {
    conversion.budget.spendCharacters(at, name);
    properties[name] = conversion.convert(property, child(at, "properties", name));
  }
  // A required property that is not declared is written too: it counts as one.
  const patterns = hasPatternProperties(schema);
  for (const name of required) {
    if (Object.hasOwn(properties, name)) continue;
    if (schema.additionalProperties === false && !patterns) {
      conversion.refuseNoValue(
        at,
        `'required' names '${shownValue(name)}', which 'properties' does not declare while 'additionalProperties' is false, so no value can match.`,
      );
    }
    conversion.budget.spend(at, "entries", 1);
    conversion.budget.spendCharacters(at, name);
    // Not declared, it is one of the additional properties: their schema shapes it when there is one.
    properties[name] =
      isRecord(schema.additionalProperties) && !patterns
        ? conversion.convert(schema.additionalProperties, child(at, "additionalProperties"))
        : anyValue;
  }
  // Declared properties (even none, `properties: {}`) are what the client wants: only those.
  if (declared !== undefined || Object.keys(properties).length > 0) {
    const counts = countProperties(conversion, schema, properties, new Set(required), at);
    conversion.noteProperties(properties, required, at, counts);
    return { type: "object", properties };
  }

  // No `properties` at all: a map whose values follow `additionalProperties` (any value by default).
  const additional = schema.additionalProperties;
  if (additional === false) {
    // A count no value can meet, or only pattern-matched names could, is refused there.
    countProperties(conversion, schema, properties, new Set(), at);
    return { type: "object", properties: {} };
  }
  const minProperties = readBound(conversion, schema, "minProperties", at);
  const maxProperties = readBound(conversion, schema, "maxProperties", at);
  checkRange(conversion, at, "minProperties", minProperties, "maxProperties", maxProperties);
  return {
    type: "object",
    additionalProperties: isRecord(additional)
      ? conversion.convert(additional, child(at, "additionalProperties"))
      : true,
    ...(minProperties === undefined ? {} : { minProperties }),
    ...(maxProperties === undefined ? {} : { maxProperties }),
  };
}

/**
 * `minProperties` and `maxProperties` beside `properties` (or beside `additionalProperties: false`
 * alone), where the grammar writes every property it holds: counts no value can meet are refused
 * (more required properties than `maxProperties`; a `minProperties` above the properties
 * `additionalProperties: false` allows). Answers the counts the grammar keeps to (see
 * schema-finite-values.ts, which leaves properties out): past `maxProperties` the last optional
 * ones (regression: `maxProperties: 1` beside two optional properties wrote both), and never
 * below a `minProperties` where no other name may be. A `minProperties` above them where more
 * may be added is not enforced: the grammar writes no property names of its own.
 */
function countProperties(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  properties: Record<string, GbnfJsonSchema>,
  required: ReadonlySet<string>,
  at: Position,
): PropertyCounts {
  // Never written as a repeat, so no grammar limit applies to them.
  const minProperties = readBound(conversion, schema, "minProperties", at, false);
  const maxProperties = readBound(conversion, schema, "maxProperties", at, false);
  checkRange(conversion, at, "minProperties", minProperties, "maxProperties", maxProperties);
  const names = Object.keys(properties);
  const closed = schema.additionalProperties === false && !hasPatternProperties(schema);
  if (maxProperties !== undefined && required.size > maxProperties) {
    conversion.refuseNoValue(
      at,
      `'required' names ${required.size} properties, but 'maxProperties' is ${maxProperties}, so no value can match.`,
    );
  }
  if (minProperties !== undefined && minProperties > names.length && closed) {
    conversion.refuseNoValue(
      at,
      `'minProperties' is ${minProperties}, but 'additionalProperties' is false and ${describeDeclared(names.length)}, so no value can match.`,
    );
  }
  // Only `patternProperties` allow other names, which the grammar does not write (it does not run
  // the client's patterns): the object is written with the declared ones at most, which such a
  // count forbids (it was, breaking it every time).
  if (
    conversion.grammarLimits &&
    minProperties !== undefined &&
    minProperties > names.length &&
    schema.additionalProperties === false &&
    !closed
  ) {
    conversion.refuse(
      at,
      `'minProperties' is ${minProperties}, but ${describeDeclared(names.length)} and only 'patternProperties' allow other names, which a local model's grammar does not write (it does not enforce patterns on names). Declare the names in 'properties', or lower 'minProperties'.`,
    );
  }
  return { minimum: closed ? minProperties : undefined, maximum: maxProperties };
}

/** How many properties `properties` declares, as a refusal says it. */
function describeDeclared(count: number): string {
  if (count === 0) return "no property is declared";
  return `only ${count} ${count === 1 ? "property is" : "properties are"} declared`;
}

function convertArray(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): GbnfJsonSchema {
  // Draft 2020-12 tuples use `prefixItems` (+ `items` for the rest); earlier drafts an `items` array.
  const tupleKeyword = Array.isArray(schema.prefixItems)
    ? "prefixItems"
    : Array.isArray(schema.items)
      ? "items"
      : undefined;
  const restKeyword = Array.isArray(schema.items) ? "additionalItems" : "items";
  const rest = schema[restKeyword];
  if (tupleKeyword !== undefined)
    conversion.budget.reserve(at, "steps", (schema[tupleKeyword] as unknown[]).length);
  const declaredMinItems = readBound(conversion, schema, "minItems", at);
  const declaredMaxItems = readBound(conversion, schema, "maxItems", at);
  checkRange(conversion, at, "minItems", declaredMinItems, "maxItems", declaredMaxItems);
  // Every tuple item is written: past `maxItems`, they are not part of the tuple (regression:
  // `prefixItems` of two beside `maxItems` 1 wrote two items).
  const prefixItems =
    tupleKeyword === undefined
      ? undefined
      : (schema[tupleKeyword] as unknown[])
          .slice(0, declaredMaxItems)
          .map((item, index) => conversion.convert(item, child(at, tupleKeyword, String(index))));
  const minItems = Math.max(declaredMinItems ?? 0, prefixItems?.length ?? 0);
  let maxItems = declaredMaxItems;
  // No items beyond the tuple's (none at all without one): `items: false` alone was ignored.
  if (rest === false) {
    const most = prefixItems?.length ?? 0;
    if ((declaredMinItems ?? 0) > most) {
      conversion.refuseNoValue(
        at,
        `'minItems' is ${declaredMinItems}, but '${restKeyword}' is false: an array may hold ${most === 0 ? "no items" : `only the ${most} of '${tupleKeyword}'`}, so no value can match.`,
      );
    }
    maxItems = most;
  }
  if (maxItems !== undefined) maxItems = Math.max(maxItems, minItems);
  return {
    type: "array",
    ...(prefixItems === undefined || prefixItems.length === 0 ? {} : { prefixItems }),
    ...(rest === undefined || rest === true || rest === false
      ? {}
      : { items: conversion.convert(rest, child(at, restKeyword)) }),
    ...(minItems === 0 ? {} : { minItems }),
    ...(maxItems === undefined ? {} : { maxItems }),
  };
}

/**
 * An integer within `minimum`/`maximum` and `exclusiveMinimum`/`exclusiveMaximum` (a number, or
 * draft 4's `true` beside `minimum`/`maximum`), as a definition of our own grammar (see
 * integer-range-grammar.ts); a plain integer without bounds. Bounds beyond the 15 digits a grammar
 * writes are as none; a range with no integer of at most 15 digits in it is refused.
 */
function convertIntegerRange(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): GbnfJsonSchema {
  const bounds = readNumberBounds(schema);
  if (bounds.low === undefined && bounds.high === undefined) return { type: "integer" };
  // The strictest bounds, rounded inward to the integers within them (rounding keeps their order).
  const { low: lowest, high: highest } = bounds;
  const low =
    lowest === undefined
      ? -Infinity
      : lowest.exclusive
        ? Math.floor(lowest.value) + 1
        : Math.ceil(lowest.value);
  const high =
    highest === undefined
      ? Infinity
      : highest.exclusive
        ? Math.ceil(highest.value) - 1
        : Math.floor(highest.value);
  if (low > high)
    conversion.refuseNoValue(
      at,
      `no integer is within its bounds (${describeBounds(schema)}), so no value can match.`,
    );
  const from = Math.max(low, -largestGrammarInteger);
  const to = Math.min(high, largestGrammarInteger);
  if (from > to) {
    if (!conversion.grammarLimits) return { type: "integer" };
    conversion.refuse(
      at,
      `its bounds (${describeBounds(schema)}) leave no integer of at most 15 digits, the largest the output grammar writes. Allow integers between -${largestGrammarInteger} and ${largestGrammarInteger}.`,
    );
  }
  if (from === -largestGrammarInteger && to === largestGrammarInteger) return { type: "integer" };
  // The bounds beside it tell a model that reads the parameters as JSON what they are.
  const loose = { type: "integer", minimum: from, maximum: to } as GbnfJsonSchema;
  return conversion.defineGrammar(
    `integer_${from}_${to}`.replaceAll("-", "minus"),
    loose,
    `integer ${from} ${to}`,
    at,
  );
}

function describeBounds(schema: Record<string, unknown>): string {
  return ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"]
    .filter((keyword) => schema[keyword] !== undefined)
    .map((keyword) => `'${keyword}' ${JSON.stringify(schema[keyword])}`)
    .join(", ");
}

function readNumber(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}
