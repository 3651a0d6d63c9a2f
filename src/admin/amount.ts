/**
 * Amounts at the CLI edge: decimal strings in the account currency (at most 9 decimal places)
 * to and from integer nano-units. A stand-in with the same rules as `billing/money.ts`
 * (`parseAmount` / `formatAmount`), which is meant to replace it when the two are merged.
 */

const NANO_PER_UNIT = 1_000_000_000n;
const DECIMAL_PLACES = 9;
/** The largest signed 64-bit integer: what both SQL stores hold exactly. */
const MAX_AMOUNT_NANO = 9_223_372_036_854_775_807n;
const AMOUNT_PATTERN = /^([0-9]+)(?:\.([0-9]+))?$/;

/**
 * Reads a non-negative decimal string ("0", "12", "0.10", "1.000000001") as nano-units, or
 * throws a `RangeError` whose message says what is wrong and how to write the amount.
 */
export function parseAmountToNano(text: string): bigint {
  const match = AMOUNT_PATTERN.exec(text);
  if (match === null) {
    throw new RangeError(
      `${JSON.stringify(text)} is not an amount; write a non-negative decimal number such as "10" or "0.25".`,
    );
  }
  const whole = match[1] ?? "0";
  const fraction = match[2] ?? "";
  if (fraction.length > DECIMAL_PLACES) {
    throw new RangeError(
      `${JSON.stringify(text)} has more than ${DECIMAL_PLACES} decimal places; the smallest amount is "0.000000001".`,
    );
  }
  const nano = BigInt(whole) * NANO_PER_UNIT + BigInt(fraction.padEnd(DECIMAL_PLACES, "0"));
  if (nano > MAX_AMOUNT_NANO) {
    throw new RangeError(
      `${JSON.stringify(text)} is too large; the largest amount is "${formatNano(MAX_AMOUNT_NANO)}".`,
    );
  }
  return nano;
}

/** Writes nano-units as a canonical decimal string: "0", "0.1", "12.000000001", "-3.5". */
export function formatNano(nano: bigint): string {
  const sign = nano < 0n ? "-" : "";
  const magnitude = nano < 0n ? -nano : nano;
  const whole = magnitude / NANO_PER_UNIT;
  const fraction = (magnitude % NANO_PER_UNIT).toString().padStart(DECIMAL_PLACES, "0").replace(/0+$/, "");
  return fraction === "" ? `${sign}${whole}` : `${sign}${whole}.${fraction}`;
}
