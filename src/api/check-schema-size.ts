/**
 * Bounds on the size of the JSON Schemas a chat request carries (a response format's, tools'
 * parameters), checked at the edge for every engine: nesting, entries and the characters a
 * grammar would spell out.
 */
import { maxSchemaEntries } from "../engine/llama/schema-conversion-budget.ts";
import { AppError } from "../errors/app-error.ts";
import { cutText, cutTextKeepingEnd } from "../errors/cut-text.ts";

/**
 * Deepest nesting of objects and arrays accepted in a JSON Schema the client sends (a tool's
 * parameters, a response format): real schemas stay far below it, and what goes deeper would
 * overflow the stack of every recursive walk over it (JSON.stringify, the grammar converter).
 */
export const MAX_SCHEMA_NESTING = 64;
/**
 * The most characters a JSON Schema's property names, definition names, `enum` values and
 * `const` values may hold in all, as OpenAI's structured outputs document. Required names that
 * are not declared count too (a grammar writes them as properties); descriptions and patterns,
 * which no grammar spells out, do not.
 */
export const MAX_SCHEMA_STRING_CHARS = 120_000;
/** The most characters of string values one `enum` of more than {@link LARGE_ENUM_VALUES} of them may hold (OpenAI's bound too). */
export const MAX_LARGE_ENUM_CHARS = 15_000;
const LARGE_ENUM_VALUES = 250;
/**
 * The most properties and `enum` values the schemas of one request (its tools' parameters and
 * its response format) may declare together: each may declare {@link maxSchemaEntries}, but 128
 * tools of 5000 properties each (6.6 MB) held the event loop for about a second in these checks
 * alone, for a request then refused (a model not found) at no cost to its sender.
 */
export const MAX_REQUEST_SCHEMA_ENTRIES = 20_000;

/** What the schemas of one request have declared so far: see {@link MAX_REQUEST_SCHEMA_ENTRIES}. */
export interface RequestSchemaEntries {
  entries: number;
}

/**
 * A place in the schema walked by {@link checkSchemaSize}: a value, how deep it sits, and what
 * it is: data (a constant, whose keys, strings and members count), a map of schemas by name
 * (`properties`, `$defs`, ...), or anything else, taken for a schema (a `$ref` may point anywhere).
 */
interface WalkedValue {
  value: unknown;
  kind: "data" | "schemas" | "schema";
  depth: number;
  parent: WalkedValue | undefined;
  key: string;
}

/** The keywords whose value is a map of schemas by name, and those of them whose names count. */
const schemaMaps = new Set(["properties", "$defs", "definitions", "patternProperties", "dependentSchemas"]);
const countedNames = new Set(["properties", "$defs", "definitions"]);

/**
 * Throws 400 `invalid_value` naming `param` when a JSON Schema nests deeper than
 * {@link MAX_SCHEMA_NESTING}, declares more than {@link maxSchemaEntries} properties and `enum`
 * values (constants' members and undeclared required names included), or when its names and
 * constants hold more than {@link MAX_SCHEMA_STRING_CHARS} characters, or an `enum` of more than
 * {@link LARGE_ENUM_VALUES} strings more than {@link MAX_LARGE_ENUM_CHARS}: a local grammar spells
 * each of them out (an `enum` of one 7 MB string held the event loop for seconds), and OpenAI
 * refuses them. One walk over the parsed schema, which stops at the first bound passed: an object
 * of a million keys costs about what parsing it did, and the grammar converter, which counts again
 * as it converts, never enumerates one.
 */
export function checkSchemaSize(schema: unknown, param: string, request?: RequestSchemaEntries): void {
  let characters = 0;
  let entries = 0;
  const countCharacters = (text: string, at: WalkedValue) => {
    characters += text.length;
    if (characters <= MAX_SCHEMA_STRING_CHARS) return;
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${param}': its property names, definition names, enum values and const values hold more than ${MAX_SCHEMA_STRING_CHARS} characters in all, the most a schema may have (passed at '${pointerOf(at)}'). Shorten them, or describe fewer.`,
      { param },
    );
  };
  const countEntries = (count: number, at: WalkedValue) => {
    entries += count;
    if (entries > maxSchemaEntries) {
      throw new AppError(
        "invalid_value",
        `Invalid JSON Schema in '${param}': it declares more than ${maxSchemaEntries} properties and enum values in all, the most a schema may have (passed at '${pointerOf(at)}'; the members of constants and required properties that are not declared count too). Split it, or describe fewer of them.`,
        { param },
      );
    }
    if (request === undefined) return;
    request.entries += count;
    if (request.entries <= MAX_REQUEST_SCHEMA_ENTRIES) return;
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${param}': the schemas of this request (its tools' parameters and its response format) declare more than ${MAX_REQUEST_SCHEMA_ENTRIES} properties and enum values together, the most one request may (passed at '${pointerOf(at)}'). Send fewer tools, or smaller ones.`,
      { param },
    );
  };
  const pending: WalkedValue[] = [{ value: schema, kind: "schema", depth: 0, parent: undefined, key: "" }];
  for (let at = pending.pop(); at !== undefined; at = pending.pop()) {
    const { value, kind, depth } = at;
    if (typeof value === "string" && kind === "data") countCharacters(value, at);
    if (typeof value !== "object" || value === null) continue;
    const keys = Array.isArray(value) ? undefined : Object.keys(value);
    const size = keys === undefined ? (value as unknown[]).length : keys.length;
    if (size > 0 && depth >= MAX_SCHEMA_NESTING) {
      throw new AppError(
        "invalid_value",
        `Invalid value for '${param}': its JSON nests deeper than ${MAX_SCHEMA_NESTING} levels of objects and arrays (a property nested in another takes two: its 'properties' and itself).`,
        { param },
      );
    }
    // A constant's items and members (an enum's values among them) are written out one by one.
    if (kind === "data") countEntries(size, at);
    const visit = (key: string, item: unknown, itemKind: WalkedValue["kind"]) => {
      // JSON's 1e309 parses as Infinity, which goes on as null: refused, as a seed out of range is,
      // rather than sent upstream changed.
      if (typeof item === "number" && !Number.isFinite(item)) {
        throw new AppError(
          "invalid_value",
          `Invalid JSON Schema in '${param}': the number at '${pointerOf({ value: item, kind: itemKind, depth: depth + 1, parent: at, key })}' is too large for a double (beyond ±1.8e308); write a finite one.`,
          { param },
        );
      }
      if (itemKind === "data" || (typeof item === "object" && item !== null))
        pending.push({ value: item, kind: itemKind, depth: depth + 1, parent: at, key });
    };
    if (keys === undefined) {
      const items = value as unknown[];
      for (let index = 0; index < items.length; index++) visit(String(index), items[index], kind);
      continue;
    }
    const record = value as Record<string, unknown>;
    if (kind !== "schema") {
      for (const key of keys) {
        if (kind === "data") countCharacters(key, at);
        visit(key, record[key], kind === "data" ? "data" : "schema");
      }
      continue;
    }
    const properties = isRecord(record.properties) ? record.properties : undefined;
    for (const key of keys) {
      const item = record[key];
      if (key === "const") {
        visit(key, item, "data");
      } else if (key === "enum" && Array.isArray(item)) {
        // A longer one is refused for its count as soon as it is walked.
        if (item.length <= maxSchemaEntries)
          checkLargeEnum(item, param, { value: item, kind: "data", depth: depth + 1, parent: at, key });
        visit(key, item, "data");
      } else if (key === "required" && Array.isArray(item)) {
        // A required property that is not declared is one the grammar writes all the same.
        for (const name of item) {
          if (typeof name !== "string" || (properties !== undefined && Object.hasOwn(properties, name)))
            continue;
          countEntries(1, at);
          countCharacters(name, at);
        }
        visit(key, item, "schema");
      } else if (schemaMaps.has(key) && isRecord(item)) {
        const names = Object.keys(item);
        const place: WalkedValue = { value: item, kind: "schemas", depth: depth + 1, parent: at, key };
        if (key === "properties") countEntries(names.length, place);
        if (countedNames.has(key)) for (const name of names) countCharacters(name, place);
        pending.push(place);
      } else {
        visit(key, item, "schema");
      }
    }
  }
}

/** Refuses an `enum` of more than {@link LARGE_ENUM_VALUES} strings that hold more than {@link MAX_LARGE_ENUM_CHARS} characters. */
function checkLargeEnum(values: unknown[], param: string, at: WalkedValue): void {
  let strings = 0;
  let characters = 0;
  for (const value of values) {
    if (typeof value !== "string") continue;
    strings++;
    characters += value.length;
  }
  if (strings > LARGE_ENUM_VALUES && characters > MAX_LARGE_ENUM_CHARS) {
    throw new AppError(
      "invalid_value",
      `Invalid JSON Schema in '${param}' at '${pointerOf(at)}': an enum of more than ${LARGE_ENUM_VALUES} strings (${strings}) may hold ${MAX_LARGE_ENUM_CHARS} characters in all, not ${characters}. Shorten its values, or use fewer.`,
      { param },
    );
  }
}

/** The JSON pointer of a walked place, for a message (cut in the middle when long names make it long). */
function pointerOf(at: WalkedValue): string {
  const segments: string[] = [];
  for (let place: WalkedValue | undefined = at; place?.parent !== undefined; place = place.parent) {
    segments.push(place.key.replaceAll("~", "~0").replaceAll("/", "~1"));
  }
  const pointer = ["#", ...segments.reverse()].join("/");
  return pointer.length > 200 ? `${cutText(pointer, 100)}...${cutTextKeepingEnd(pointer, 100)}` : pointer;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
