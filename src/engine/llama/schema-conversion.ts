import type { GbnfJsonSchema } from "node-llama-cpp";
import type { ConversionBudget } from "./schema-conversion-budget.ts";
import type { Position } from "./schema-position.ts";

/**
 * What the parts of a schema's conversion (convert-json-schema-to-gbnf.ts) share: the converter
 * they recurse through, the budget they spend, and how they refuse the schema.
 */
export interface SchemaConversion {
  /** Whether the output is a llama.cpp grammar, whose limits apply (see convertJsonSchemaToGbnf). */
  readonly grammarLimits: boolean;
  readonly budget: ConversionBudget;
  convert(schema: unknown, at: Position): GbnfJsonSchema;
  /** Throws 400 `invalid_value` naming the place and the problem. */
  refuse(at: Position, problem: string): never;
}

/** "Any JSON value", which the subset has no word for. */
export const anyValue: GbnfJsonSchema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "array" },
    { type: "object", additionalProperties: true },
  ],
};
