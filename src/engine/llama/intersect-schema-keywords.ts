import { shownValue } from "../../errors/shown-value.ts";
import { sameValue } from "./constant-meets-keywords.ts";
import { intersectNumberKeywords, numberKeywords } from "./intersect-number-keywords.ts";
import { hasType, isRecord, readTypes } from "./read-schema-types.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";
import { valueSet } from "./value-set.ts";

/** The formats a grammar enforces: two of them are never the same string. */
const enforcedFormats = new Set(["date-time", "time", "date"]);
/**
 * Lower and upper counts: of the two schemas', the higher lower and the lower upper one hold.
 * Numbers' bounds, which may be exclusive, are merged by intersect-number-keywords.ts.
 */
const ranges = [
  ["minLength", "maxLength", "length", ["string"]],
  ["minItems", "maxItems", "number of items", ["array"]],
  ["minProperties", "maxProperties", "number of properties", ["object"]],
] as const;
const numberTypes = ["number", "integer"];
const objectKeywords = ["properties", "additionalProperties"];
const arrayKeywords = ["prefixItems", "items", "additionalItems"];
/** The keywords merged here, not merely taken from the first side that has them. */
const mergedKeywords = new Set([
  "type",
  "const",
  "enum",
  "required",
  "anyOf",
  "oneOf",
  ...objectKeywords,
  ...arrayKeywords,
  ...numberKeywords,
]);

/** A merge in progress: the schema so far, and which of its arrays and objects are its own copies. */
export interface Intersection {
  readonly merged: Record<string, unknown>;
  /** Keywords whose value the merge copied: added to in place, not copied again. */
  readonly owned: Set<string>;
}

/** A merge that starts from `base`'s keywords (not changed: what the merge adds to, it copies). */
export function startIntersection(base: Record<string, unknown>): Intersection {
  const merged = withoutNullable(base);
  return { merged: merged === base ? { ...base } : merged, owned: new Set() };
}

/**
 * Narrows `into.merged` (in place) to what `side` allows too, as both must hold (`allOf`, or an
 * `anyOf` branch and the keywords beside it): types, constants, ranges and formats intersected,
 * required names gathered, properties and items that both declare become an `allOf` of the two
 * (those one side declares meet the other's `additionalProperties`, `items`), the other keywords
 * taken from the first that has them. Returns why no value can meet both, or `undefined`. A
 * keyword that is not valid is kept where it is, for the conversion to refuse.
 */
export function intersectKeywords(
  conversion: SchemaConversion,
  into: Intersection,
  branch: Record<string, unknown>,
  at: Position,
): string | undefined {
  const side = withoutNullable(branch);
  const { merged } = into;
  if (side.type !== undefined) {
    if (merged.type === undefined) merged.type = side.type;
    else {
      const left = readTypes({ type: merged.type });
      const right = readTypes({ type: side.type });
      const both = intersectTypes(left, right);
      if (both.length === 0) return `no 'type' in common (${left.join(", ")} and ${right.join(", ")})`;
      merged.type = both;
    }
  }
  const values = intersectValues(conversion, into, side, at);
  if (values !== undefined) return values;
  mergeRequired(conversion, into, side, at);
  if (hasObject(side) && hasObject(merged)) {
    const problem = mergeObjects(conversion, into, side, at);
    if (problem !== undefined && !exclude(merged, ["object"])) return problem;
  } else copyAbsent(merged, side, objectKeywords);
  if (hasArray(side) && hasArray(merged)) mergeArrays(conversion, into, side, at);
  else copyAbsent(merged, side, arrayKeywords);
  mergeAlternatives(merged, side);
  for (const [key, value] of Object.entries(side)) {
    if (!mergedKeywords.has(key) && !(key in merged)) merged[key] = value;
  }
  if (typeof merged.format === "string" && typeof side.format === "string" && merged.format !== side.format) {
    // Two formats a grammar enforces meet no string; to JSON Schema (an upstream model) a format
    // may be only an annotation.
    if (enforcedFormats.has(merged.format) && enforcedFormats.has(side.format)) {
      if (conversion.grammarLimits && applies(merged, ["string"]) && !exclude(merged, ["string"]))
        return `no 'format' in common ('${merged.format}' and '${side.format}')`;
    } else if (enforcedFormats.has(side.format)) merged.format = side.format;
  }
  for (const [low, high, what, types] of ranges) {
    for (const key of [low, high]) {
      const [existing, value] = [merged[key], side[key]];
      if (value === undefined || existing === value) continue;
      // An invalid bound stays, for the conversion to refuse.
      if (!isBound(existing)) continue;
      if (!isBound(value)) merged[key] = value;
      else merged[key] = key === low ? Math.max(existing, value) : Math.min(existing, value);
    }
    const [lowest, highest] = [merged[low], merged[high]];
    const contradicts = isBound(lowest) && isBound(highest) && lowest > highest;
    if ((low in side || high in side) && contradicts && applies(merged, types) && !exclude(merged, types))
      return `no ${what} in common ('${low}' ${lowest} is above '${high}' ${highest})`;
  }
  const numbers = intersectNumberKeywords(merged, side);
  if (numbers !== undefined && applies(merged, numberTypes) && !exclude(merged, numberTypes)) return numbers;
  if (side.type !== undefined || readValues(side) !== undefined) {
    const problem = checkValues(merged);
    if (problem !== undefined) return problem;
  }
  const required = Array.isArray(side.required) && applies(merged, ["object"]);
  const problem = required ? checkRequired(merged, side.required as unknown[]) : undefined;
  return problem !== undefined && !exclude(merged, ["object"]) ? problem : undefined;
}

/**
 * Leaves values of `kinds` out of `merged`'s types where they cannot meet both sides, and tells
 * whether a type is left (`["string", "null"]` with contradictory lengths is `["null"]`). Without
 * types, none is: the conversion reads the type from those very keywords.
 */
function exclude(merged: Record<string, unknown>, kinds: readonly string[]): boolean {
  if (merged.type === undefined) return false;
  const left = readTypes({ type: merged.type }).filter((type) => !kinds.includes(type));
  if (left.length === 0) return false;
  merged.type = left;
  return true;
}

/**
 * Whether keywords of values of `kinds` (lengths of strings, ...) bear on what `merged` allows:
 * it allows one of them, or declares no type (the conversion then reads one from those keywords).
 */
function applies(merged: Record<string, unknown>, kinds: readonly string[]): boolean {
  return merged.type === undefined || readTypes({ type: merged.type }).some((type) => kinds.includes(type));
}

/** `schema` with `nullable: true` as the `null` type beside its `type` (without one, it adds nothing). */
function withoutNullable(schema: Record<string, unknown>): Record<string, unknown> {
  if (!("nullable" in schema)) return schema;
  const { nullable, ...rest } = schema;
  if (nullable !== true || rest.type === undefined) return rest;
  const types = readTypes(rest);
  return { ...rest, type: types.includes("null") ? types : [...types, "null"] };
}

function copyAbsent(
  merged: Record<string, unknown>,
  side: Record<string, unknown>,
  keywords: string[],
): void {
  for (const key of keywords) if (key in side && !(key in merged)) merged[key] = side[key];
}

function hasObject(schema: Record<string, unknown>): boolean {
  return isRecord(schema.properties) || schema.additionalProperties !== undefined;
}

function hasArray(schema: Record<string, unknown>): boolean {
  return schema.prefixItems !== undefined || schema.items !== undefined;
}

/** Both sides' types (an integer is a number). */
function intersectTypes(left: string[], right: string[]): string[] {
  const allows = (types: string[], type: string) =>
    types.includes(type) || (type === "integer" && types.includes("number"));
  return [...new Set([...left, ...right])].filter((type) => allows(left, type) && allows(right, type));
}

/** Why no `const` or `enum` value is of the types, when none is. */
function checkValues(merged: Record<string, unknown>): string | undefined {
  const values = readValues(merged);
  if (values === undefined || merged.type === undefined) return undefined;
  const types = readTypes({ type: merged.type });
  if (values.some((value) => types.some((type) => hasType(value, type)))) return undefined;
  return `no 'const' or 'enum' value of the 'type' (${types.join(", ")})`;
}

/** Keeps the `const` and `enum` values both sides allow, in `side`'s order. */
function intersectValues(
  conversion: SchemaConversion,
  into: Intersection,
  side: Record<string, unknown>,
  at: Position,
): string | undefined {
  // Looking for a `const` among `enum` values is a step per value.
  for (const schema of [side, into.merged]) {
    if ("const" in schema && Array.isArray(schema.enum))
      conversion.budget.spend(at, "steps", schema.enum.length);
  }
  const theirs = readValues(side);
  if (theirs === undefined) return undefined;
  if (theirs.length === 0) return "a 'const' that is not one of the 'enum' values beside it";
  const { merged } = into;
  const ours = readValues(merged);
  if (ours === undefined) {
    if ("const" in side) merged.const = side.const;
    if (Array.isArray(side.enum)) merged.enum = side.enum;
    return undefined;
  }
  const known = valueSet(ours);
  const both = theirs.filter((value) => known.has(value));
  if (both.length === 0) return "no 'const' or 'enum' value in common";
  delete merged.const;
  merged.enum = both;
  return undefined;
}

/** The values `const` and `enum` allow (both: the constant if it is one of the values), or `undefined` for any. */
function readValues(schema: Record<string, unknown>): unknown[] | undefined {
  const values = Array.isArray(schema.enum) ? schema.enum : undefined;
  if (!("const" in schema)) return values;
  return values === undefined || values.some((value) => sameValue(value, schema.const)) ? [schema.const] : [];
}

function mergeRequired(
  conversion: SchemaConversion,
  into: Intersection,
  side: Record<string, unknown>,
  at: Position,
): void {
  const { merged, owned } = into;
  const [existing, value] = [merged.required, side.required];
  if (!Array.isArray(value)) return;
  if (!Array.isArray(existing)) {
    if (existing === undefined) merged.required = value;
    return;
  }
  const required: unknown[] = owned.has("required") ? existing : [...existing];
  conversion.budget.spend(at, "steps", (owned.has("required") ? 0 : existing.length) + value.length);
  for (const name of value) required.push(name);
  merged.required = required;
  owned.add("required");
}

/**
 * Properties: a name either side declares meets what each side says of it (its own schema, or its
 * `additionalProperties` where it does not declare it); one that no value meets (`false`) is left
 * out, or, required, leaves no value at all. Undeclared names meet both `additionalProperties`.
 * Only the names this side touches are looked at: merging is linear in what the branches declare.
 */
function mergeObjects(
  conversion: SchemaConversion,
  into: Intersection,
  side: Record<string, unknown>,
  at: Position,
): string | undefined {
  const { merged, owned } = into;
  const ours = isRecord(merged.properties) ? merged.properties : undefined;
  const theirs = isRecord(side.properties) ? side.properties : undefined;
  const [ourRest, theirRest] = [merged.additionalProperties, side.additionalProperties];
  const rest = both(ourRest, theirRest);
  if (rest !== undefined) merged.additionalProperties = rest;
  const required = Array.isArray(merged.required) ? merged.required : [];
  // Now that no other name is allowed, each required one must be declared.
  const closing = rest === false && ourRest !== false;
  if (ours === undefined && theirs === undefined)
    return closing && applies(merged, ["object"]) ? checkRequired(merged, required) : undefined;
  // Without a prototype, so that a property named `__proto__` is one like any other.
  const copy = !owned.has("properties") || ours === undefined;
  const properties: Record<string, unknown> = copy ? Object.assign(Object.create(null), ours) : ours;
  const touched = Object.keys(theirs ?? {});
  conversion.budget.spend(at, "steps", (copy ? Object.keys(ours ?? {}).length : 0) + touched.length);
  for (const name of touched) {
    const our = ours !== undefined && Object.hasOwn(ours, name) ? ours[name] : ourRest;
    properties[name] = both(our, theirs?.[name]);
  }
  if (theirRest !== undefined && theirRest !== true && ours !== undefined) {
    const ourNames = Object.keys(ours).filter((name) => theirs === undefined || !Object.hasOwn(theirs, name));
    conversion.budget.spend(at, "steps", ourNames.length);
    for (const name of ourNames) properties[name] = both(ours[name], theirRest);
    touched.push(...ourNames);
  }
  merged.properties = properties;
  owned.add("properties");
  const checked = applies(merged, ["object"]);
  for (const name of touched) {
    if (properties[name] !== false) continue;
    if (checked && required.includes(name))
      return `'required' names '${shownValue(name)}', which the other keywords do not allow`;
    // A property that no value meets, and not required, is not written at all.
    delete properties[name];
  }
  return closing && checked ? checkRequired(merged, required) : undefined;
}

/** Why `names`, required, leave `merged` no value: one that its properties or `additionalProperties` do not allow. */
function checkRequired(merged: Record<string, unknown>, names: readonly unknown[]): string | undefined {
  const properties = isRecord(merged.properties) ? merged.properties : undefined;
  for (const name of names) {
    if (typeof name !== "string") continue;
    const declared = properties !== undefined && Object.hasOwn(properties, name);
    if (declared ? properties[name] === false : merged.additionalProperties === false)
      return `'required' names '${shownValue(name)}', which the other keywords do not allow`;
  }
  return undefined;
}

/** Items: each position meets what both sides say of it (a tuple's item, or the rest's schema). */
function mergeArrays(
  conversion: SchemaConversion,
  into: Intersection,
  side: Record<string, unknown>,
  at: Position,
): void {
  const { merged } = into;
  const [ours, theirs] = [readTuple(merged), readTuple(side)];
  // An invalid one is left for the conversion to refuse.
  if (ours === undefined || theirs === undefined) return;
  const length = Math.max(ours.prefix.length, theirs.prefix.length);
  conversion.budget.spend(at, "steps", length);
  const prefix: unknown[] = [];
  let rest = both(ours.rest, theirs.rest);
  for (let index = 0; index < length; index++) {
    const item = both(ours.prefix[index] ?? ours.rest, theirs.prefix[index] ?? theirs.rest);
    // No value at this position: the array ends before it.
    if (item === false) {
      rest = false;
      break;
    }
    prefix.push(item ?? true);
  }
  delete merged.additionalItems;
  delete merged.prefixItems;
  delete merged.items;
  if (prefix.length > 0) merged.prefixItems = prefix;
  if (rest !== undefined) merged.items = rest;
}

/** A draft 2020-12 or earlier array's tuple and the schema of the items after it. */
function readTuple(schema: Record<string, unknown>): { prefix: unknown[]; rest: unknown } | undefined {
  if (Array.isArray(schema.prefixItems)) {
    return Array.isArray(schema.items) ? undefined : { prefix: schema.prefixItems, rest: schema.items };
  }
  if (schema.prefixItems !== undefined) return undefined;
  if (Array.isArray(schema.items)) return { prefix: schema.items, rest: schema.additionalItems };
  return { prefix: [], rest: schema.items };
}

/**
 * Alternatives of both sides both hold: a second list goes to the other keyword (`anyOf` beside
 * `oneOf` is converted as both), a third nests in a one-branch `oneOf` with the second.
 */
function mergeAlternatives(merged: Record<string, unknown>, side: Record<string, unknown>): void {
  for (const keyword of ["anyOf", "oneOf"]) {
    const list = side[keyword];
    if (!Array.isArray(list) || merged[keyword] === list) continue;
    if (merged.anyOf === undefined) merged.anyOf = list;
    else if (merged.oneOf === undefined) merged.oneOf = list;
    else merged.oneOf = [{ anyOf: list, oneOf: merged.oneOf }];
  }
}

/** A schema that both schemas (`undefined`: no schema) hold for: `allOf` of them where it must. */
export function both(first: unknown, second: unknown): unknown {
  if (first === undefined || first === true || first === second) return second;
  if (second === undefined || second === true) return first;
  if (first === false || second === false) return false;
  return { allOf: [first, second] };
}

function isBound(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 0;
}
