import type { GbnfJsonSchema } from "node-llama-cpp";
import { decimalPlacesOf } from "./decimal-multiples.ts";
import { decimalRange } from "./decimal-range-grammar.ts";
import { describeNumberBounds, isFiniteNumber, readNumberBounds } from "./number-bounds.ts";
import type { SchemaConversion } from "./schema-conversion.ts";
import type { Position } from "./schema-position.ts";

/**
 * A number (that may be fractional) within `minimum`/`maximum` and `exclusiveMinimum`/
 * `exclusiveMaximum`, and with the decimals a `multipleOf` of 1, 0.1, 0.01, ... allows, as a
 * definition of our own grammar (see decimal-range-grammar.ts) for a local model's output grammar; a plain number without bounds, or where no grammar is written (an
 * upstream model reads the bounds itself). A range with no number of at most 15 significant
 * digits in it is refused. Empty ranges were refused already (convert-typed-schema.ts).
 */
export function convertNumberRange(
  conversion: SchemaConversion,
  schema: Record<string, unknown>,
  at: Position,
): GbnfJsonSchema {
  const bounds = readNumberBounds(schema);
  const decimalPlaces = isFiniteNumber(schema.multipleOf) ? decimalPlacesOf(schema.multipleOf) : undefined;
  if (
    !conversion.grammarLimits ||
    (bounds.low === undefined && bounds.high === undefined && decimalPlaces === undefined)
  )
    return { type: "number" };
  const range = decimalRange(bounds, decimalPlaces);
  if (range === undefined)
    conversion.refuse(
      at,
      `its bounds (${describeNumberBounds(bounds)}) leave no number of at most 15 significant digits, the most the output grammar writes (so that every number it writes reads back the same). Widen the bounds.`,
    );
  // The bounds beside it tell a model that reads the parameters as JSON what they are.
  const loose: Record<string, unknown> = { type: "number" };
  for (const bound of [bounds.low, bounds.high]) if (bound !== undefined) loose[bound.keyword] = bound.value;
  if (decimalPlaces !== undefined) loose.multipleOf = schema.multipleOf;
  const { low, high, fractionDigits } = range;
  return conversion.defineGrammar(
    `number_${low}_${high}_${fractionDigits}`.replaceAll("-", "minus"),
    loose as GbnfJsonSchema,
    `decimal ${low} ${high} ${fractionDigits}`,
    at,
  );
}
