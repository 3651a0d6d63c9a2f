import { isMultipleOf } from "./decimal-multiples.ts";

/** A lower or upper bound of numbers, and the keyword that sets it (for messages). */
export interface NumberBound {
  readonly value: number;
  /** Whether `value` itself is left out (`exclusiveMinimum`, or draft 4's `true` beside `minimum`). */
  readonly exclusive: boolean;
  readonly keyword: string;
}

/** The effective bounds of a schema's numbers (`undefined`: none on that side). */
export interface NumberBounds {
  readonly low: NumberBound | undefined;
  readonly high: NumberBound | undefined;
}

/** The keywords that bound numbers. */
export const numberBoundKeywords = ["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"] as const;

/**
 * The strictest lower and upper bounds `schema`'s keywords set: `minimum` and `exclusiveMinimum`
 * both hold (draft 6 on), or `exclusiveMinimum: true` makes `minimum` exclusive (draft 4), and
 * alike for the maximum. Values that are not finite numbers bound nothing (the conversion ignores
 * them too).
 */
export function readNumberBounds(schema: Record<string, unknown>): NumberBounds {
  return {
    low: readSide(schema, "minimum", "exclusiveMinimum", "low"),
    high: readSide(schema, "maximum", "exclusiveMaximum", "high"),
  };
}

function readSide(
  schema: Record<string, unknown>,
  inclusiveKeyword: "minimum" | "maximum",
  exclusiveKeyword: "exclusiveMinimum" | "exclusiveMaximum",
  side: "low" | "high",
): NumberBound | undefined {
  const [inclusive, exclusive] = [schema[inclusiveKeyword], schema[exclusiveKeyword]];
  let bound: NumberBound | undefined;
  if (isFiniteNumber(inclusive))
    bound = { value: inclusive, exclusive: exclusive === true, keyword: inclusiveKeyword };
  if (isFiniteNumber(exclusive))
    bound = stricterBound(bound, { value: exclusive, exclusive: true, keyword: exclusiveKeyword }, side);
  return bound;
}

/** Of two lower (`low`) or upper (`high`) bounds, the one that leaves out more: both hold. */
export function stricterBound(
  first: NumberBound | undefined,
  second: NumberBound | undefined,
  side: "low" | "high",
): NumberBound | undefined {
  if (first === undefined) return second;
  if (second === undefined) return first;
  if (first.value === second.value) return second.exclusive ? second : first;
  return (side === "low" ? first.value > second.value : first.value < second.value) ? first : second;
}

/** Whether no number is within both bounds (`exclusiveMinimum` 5 beside `maximum` 5). */
export function boundsAreEmpty({ low, high }: NumberBounds): boolean {
  if (low === undefined || high === undefined) return false;
  return low.value > high.value || (low.value === high.value && (low.exclusive || high.exclusive));
}

/** The bounds for a message: `'exclusiveMinimum' 5 and 'maximum' 5`. */
export function describeNumberBounds({ low, high }: NumberBounds): string {
  return [low, high]
    .filter((bound) => bound !== undefined)
    .map((bound) => `'${bound.keyword}' ${bound.value}`)
    .join(" and ");
}

/** Whether `value` is within `schema`'s bounds and a multiple of its `multipleOf` (one above 0). */
export function numberMeetsKeywords(value: number, schema: Record<string, unknown>): boolean {
  const { low, high } = readNumberBounds(schema);
  if (low !== undefined && (low.exclusive ? value <= low.value : value < low.value)) return false;
  if (high !== undefined && (high.exclusive ? value >= high.value : value > high.value)) return false;
  const { multipleOf } = schema;
  return !isFiniteNumber(multipleOf) || multipleOf <= 0 || isMultipleOf(value, multipleOf);
}

export function isFiniteNumber(value: unknown): value is number {
  return typeof value === "number" && Number.isFinite(value);
}
