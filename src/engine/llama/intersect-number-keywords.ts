import { leastCommonMultiple } from "./decimal-multiples.ts";
import {
  boundsAreEmpty,
  describeNumberBounds,
  isFiniteNumber,
  numberBoundKeywords,
  readNumberBounds,
} from "./number-bounds.ts";

/** The keywords merged here (see intersect-schema-keywords.ts, which leaves them to this). */
export const numberKeywords = [...numberBoundKeywords, "multipleOf"];

/**
 * Narrows `merged`'s numbers (in place) to those `side` allows too, as both must hold: of each
 * bound keyword the stricter value (the higher `minimum` and `exclusiveMinimum`, the lower
 * `maximum` and `exclusiveMaximum`; regression: the first branch's `exclusiveMinimum` was kept,
 * so `allOf` of `> 1` and `> 5` wrote 2), and a `multipleOf` of both divisors. Returns why no
 * number meets both, or `undefined`.
 *
 * Draft 4's `exclusiveMinimum: true` makes its own schema's `minimum` exclusive: merged as it is,
 * it made another branch's `minimum` exclusive too (`allOf` of `> 3` and `>= 5` was `> 5`). So
 * each side is read in draft 6's form first, a number beside the `minimum` it makes exclusive
 * (the `minimum` stays: without `type`, it is what tells a number).
 */
export function intersectNumberKeywords(
  merged: Record<string, unknown>,
  side: Record<string, unknown>,
): string | undefined {
  if (!numberKeywords.some((keyword) => keyword in side)) return undefined;
  const [ours, theirs] = [readDraft6Bounds(merged), readDraft6Bounds(side)];
  for (const keyword of numberBoundKeywords) {
    const [our, their] = [ours[keyword], theirs[keyword]];
    if (our !== undefined && their !== undefined) {
      const lower = keyword === "minimum" || keyword === "exclusiveMinimum";
      merged[keyword] = lower ? Math.max(our, their) : Math.min(our, their);
    } else if (our !== undefined || their !== undefined) merged[keyword] = our ?? their;
    // A draft 4 boolean is read above: beside another branch's bound it would change that one.
    else if (typeof merged[keyword] === "boolean") delete merged[keyword];
    // What is not a number bounds nothing; kept as the client wrote it, as it was before merging.
    else if (!(keyword in merged) && keyword in side && typeof side[keyword] !== "boolean")
      merged[keyword] = side[keyword];
  }
  mergeMultipleOf(merged, side);
  const bounds = readNumberBounds(merged);
  return boundsAreEmpty(bounds) ? `no number in common (${describeNumberBounds(bounds)})` : undefined;
}

/** The bound keywords of `schema` as draft 6 writes them: a number each (`undefined`: none). */
function readDraft6Bounds(schema: Record<string, unknown>): Record<string, number | undefined> {
  const read = (inclusive: string, exclusive: string) => {
    const [value, flag] = [schema[inclusive], schema[exclusive]];
    return {
      [inclusive]: isFiniteNumber(value) ? value : undefined,
      [exclusive]: isFiniteNumber(flag) ? flag : flag === true && isFiniteNumber(value) ? value : undefined,
    };
  };
  return { ...read("minimum", "exclusiveMinimum"), ...read("maximum", "exclusiveMaximum") };
}

/**
 * Multiples of both divisors are multiples of their least common multiple (`2` and `3`: `6`;
 * `0.1` and `0.25`: `0.5`). Where it is no finite number, the first divisor is kept (as before):
 * the grammar does not enforce `multipleOf`, only the constants written are checked against it.
 */
function mergeMultipleOf(merged: Record<string, unknown>, side: Record<string, unknown>): void {
  const [ours, theirs] = [merged.multipleOf, side.multipleOf];
  const valid = (value: unknown): value is number => isFiniteNumber(value) && value > 0;
  if (!valid(theirs)) {
    if (!("multipleOf" in merged) && "multipleOf" in side) merged.multipleOf = theirs;
    return;
  }
  if (!valid(ours)) merged.multipleOf = theirs;
  else if (ours !== theirs) merged.multipleOf = leastCommonMultiple(ours, theirs) ?? ours;
}
