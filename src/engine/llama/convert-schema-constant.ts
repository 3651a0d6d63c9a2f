import type { GbnfJsonSchema } from "node-llama-cpp";
import { isRecord } from "./read-schema-types.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";

/** An exact schema for a constant: `const` for primitives, fixed shapes for objects and arrays. */
export function convertConstant(conversion: SchemaConversion, value: unknown, at: Position): GbnfJsonSchema {
  if (value === null || typeof value === "boolean") return { const: value };
  if (typeof value === "string") {
    conversion.budget.spendCharacters(at, value);
    return { const: value };
  }
  if (typeof value === "number") return Number.isFinite(value) ? { const: value } : { type: "null" };
  // Each item and member is a property or tuple item of the grammar: they count as entries.
  if (Array.isArray(value)) {
    if (value.length === 0) return { type: "array", maxItems: 0 };
    conversion.budget.spend(at, "entries", value.length);
    return {
      type: "array",
      prefixItems: value.map((item) => convertConstant(conversion, item, at)),
      minItems: value.length,
      maxItems: value.length,
    };
  }
  if (isRecord(value)) {
    const entries = Object.entries(value);
    if (entries.length === 0) return { type: "object", properties: {} };
    conversion.budget.spend(at, "entries", entries.length);
    const properties: Record<string, GbnfJsonSchema> = Object.create(null);
    for (const [key, entry] of entries) {
      conversion.budget.spendCharacters(at, key);
      properties[key] = convertConstant(conversion, entry, at);
    }
    return { type: "object", properties };
  }
  return { type: "null" };
}
