/**
 * Conversions between the values a store is given and its columns (see `database.ts` for the
 * conventions shared by SQLite and PostgreSQL).
 */

/** The largest value a `bigint` column holds (2^63 − 1), in both SQLite and PostgreSQL. */
export const MAX_BIGINT_COLUMN = 9_223_372_036_854_775_807n;

/** Timestamps are stored as ISO 8601 UTC text with milliseconds, which sorts as time does. */
export function toTimestampText(date: Date): string {
  return date.toISOString();
}

export function fromTimestampText(text: string): Date {
  return new Date(text);
}

/**
 * An integer column or aggregate as a `bigint`. SQLite answers `bigint` (`readBigInts`);
 * PostgreSQL drivers may answer a decimal string for aggregates; `null` (an empty sum) is 0.
 */
export function readBigInt(value: unknown): bigint {
  switch (typeof value) {
    case "bigint":
      return value;
    case "string":
      if (/^-?[0-9]+$/.test(value)) return BigInt(value);
      break;
    case "number":
      if (Number.isSafeInteger(value)) return BigInt(value);
      break;
    case "object":
      if (value === null) return 0n;
      break;
    default:
      break;
  }
  throw new TypeError(`The store answered a value of type ${typeof value} where it expected an integer.`);
}

/** A count (tokens) for an integer column; throws a `RangeError` unless a non-negative integer. */
export function toCountColumn(name: string, value: number): bigint {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative integer (got ${String(value)}).`);
  }
  return BigInt(value);
}

/** A duration for an integer column: whole milliseconds (fractions rounded), never negative. */
export function toMillisecondsColumn(name: string, value: number): bigint {
  if (!Number.isFinite(value) || value < 0) {
    throw new RangeError(`${name} must be a non-negative number of milliseconds (got ${String(value)}).`);
  }
  return BigInt(Math.round(value));
}

/** The `limit` of a page a listing reads: a whole number, at least 1; `what` names its rows in the error. */
export function requirePageLimit(limit: number, what: string): number {
  if (!Number.isSafeInteger(limit) || limit < 1) {
    throw new RangeError(`A page holds at least one ${what} (limit ${String(limit)}).`);
  }
  return limit;
}
