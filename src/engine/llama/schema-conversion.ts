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
  /**
   * The schema a `$ref` within this schema points at, checked as a converted one is, for an
   * `allOf` or an `anyOf` branch to merge (`true` or `false` as they are); `undefined` where it
   * must stay a reference: it is not a schema, does not resolve (converting it refuses it), or is
   * being converted (a cycle).
   */
  resolveMergeable(reference: string, at: Position): Record<string, unknown> | boolean | undefined;
  /**
   * Notes where an `anyOf` or `oneOf` list sits in the client's schema (`at`: its keyword), so that
   * its branches are named there once a merge (`allOf`, an `anyOf` branch) has moved it.
   */
  noteAlternatives(list: unknown[], at: Position): void;
  /**
   * Notes which of an object's converted `properties` are required, and how many of them it may
   * write: at least `minimum` where no other name may be, at most `maximum` (`minProperties`,
   * `maxProperties`; see schema-finite-values.ts).
   */
  noteProperties(
    properties: Record<string, GbnfJsonSchema>,
    required: readonly string[],
    at: Position,
    counts?: PropertyCounts,
  ): void;
  /**
   * A reference to a `$defs` schema that a grammar writes as the grammar `spec` names (`uuid`,
   * `integer MIN MAX`; see patch-grammar-definitions.ts), a value `loose` describes for
   * node-llama-cpp's own checks; `name` is the definition's name, made unique. The same grammar
   * is defined once.
   */
  defineGrammar(name: string, loose: GbnfJsonSchema, spec: string, at: Position): GbnfJsonSchema;
  /** Throws 400 `invalid_value` naming the place and the problem. */
  refuse(at: Position, problem: string): never;
  /**
   * {@link refuse}, for a schema that is valid but that no value meets: within an `anyOf` or
   * `oneOf` branch, the branch is left out instead (see convert-json-schema-to-gbnf.ts).
   */
  refuseNoValue(at: Position, problem: string): never;
}

/** "Any JSON value", which the subset has no word for. */
export const anyValue: GbnfJsonSchema = {
  oneOf: [
    { type: ["string", "number", "boolean", "null"] },
    { type: "array" },
    { type: "object", additionalProperties: true },
  ],
};

/** How many properties an object writes: at least `minimum`, at most `maximum` (see noteProperties). */
export interface PropertyCounts {
  minimum: number | undefined;
  maximum: number | undefined;
}
