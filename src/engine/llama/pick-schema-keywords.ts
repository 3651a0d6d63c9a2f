import { hasPatternProperties } from "./read-schema-types.ts";

/** The keywords the conversion reads: all that an `anyOf` branch takes from its siblings and `allOf` merges. */
const convertedKeywords = [
  "type",
  "properties",
  "required",
  "additionalProperties",
  "items",
  "prefixItems",
  "additionalItems",
  "enum",
  "const",
  "nullable",
  "format",
  "pattern",
  "minLength",
  "maxLength",
  "minItems",
  "maxItems",
  "minProperties",
  "maxProperties",
  "minimum",
  "maximum",
  "exclusiveMinimum",
  "exclusiveMaximum",
  "multipleOf",
  "$ref",
  "allOf",
  "anyOf",
  "oneOf",
];
/** What a schema keeps when it is copied (checked, `description` written) but does not hand to `anyOf` branches. */
const ownKeywords = ["description", "$defs", "definitions"];
export const siblingKeywords = convertedKeywords.filter(
  (keyword) => keyword !== "anyOf" && keyword !== "oneOf",
);
export const copiedKeywords = [...convertedKeywords, ...ownKeywords];

/**
 * The `keywords` `schema` has: a copy whose size does not depend on the client's object. Beside
 * `patternProperties`, which are not merged, `additionalProperties` is left out: it holds only
 * for names no pattern matches, so a merge (`allOf`, an `anyOf` branch and its siblings) would
 * otherwise take every undeclared name for forbidden and refuse a schema some values meet.
 */
export function pick(schema: Record<string, unknown>, keywords: readonly string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const keyword of keywords) {
    if (Object.hasOwn(schema, keyword)) picked[keyword] = schema[keyword];
  }
  if ("additionalProperties" in picked && hasPatternProperties(schema)) delete picked.additionalProperties;
  return picked;
}
