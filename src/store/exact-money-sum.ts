import { sql } from "kysely";
import { readBigInt } from "./column-values.ts";

/** 2^32: where {@link exactSumOf} splits each value. */
const SUM_SPLIT = 4_294_967_296n;

/**
 * The exact sum of an integer column of nano-units, which may exceed 2^63 - 1 (the usage of
 * several accounts, or the credits of one that spent and was credited again), as two sums that
 * never overflow: of `value / 2^32` (less than 2^31 in size each) and of `value % 2^32` (less
 * than 2^32), fine up to 2^31 rows. Both databases divide integers truncating toward zero, with
 * a remainder of the dividend's sign, so `high * 2^32 + low` is the sum for negative values too.
 * SQLite's `total()` would be a floating-point number, and PostgreSQL's `numeric` sum is not
 * SQLite's; this reads the same on both. Join the halves with {@link readExactSum}.
 */
export function exactSumOf(column: string) {
  const value = sql.ref(column);
  const split = sql.lit(Number(SUM_SPLIT));
  return [
    sql<bigint>`cast(coalesce(sum(${value} / ${split}), 0) as bigint)`.as("sum_high"),
    sql<bigint>`cast(coalesce(sum(${value} % ${split}), 0) as bigint)`.as("sum_low"),
  ] as const;
}

/** The sum that {@link exactSumOf} selected. */
export function readExactSum(row: { sum_high: unknown; sum_low: unknown }): bigint {
  return readBigInt(row.sum_high) * SUM_SPLIT + readBigInt(row.sum_low);
}

/** Rows of {@link exactSumOf} grouped by account, as each account's sum. */
export function toExactSums(rows: readonly { account_id: string; sum_high: unknown; sum_low: unknown }[]) {
  return new Map(rows.map((row) => [row.account_id, readExactSum(row)]));
}
