/**
 * `multipleOf` on the decimals a client wrote. Floating point division says 0.3 is no multiple of
 * 0.1 (0.3 / 0.1 is 2.9999999999999996), so numbers are read as the decimal JSON text they print
 * as (a whole coefficient times a power of ten) and divided exactly, with BigInt: a double's
 * exponent runs from -324 to 308, so the coefficients stay a few thousand bits at most.
 */

/** `value` as `coefficient` × 10^`exponent`, from the shortest decimal that prints as it. */
export interface Decimal {
  readonly coefficient: bigint;
  readonly exponent: number;
}

export function readDecimal(value: number): Decimal | undefined {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/.exec(String(value));
  if (match === null) return undefined;
  const [, sign = "", whole = "", fraction = "", exponent = "0"] = match;
  return { coefficient: BigInt(`${sign}${whole}${fraction}`), exponent: Number(exponent) - fraction.length };
}

/** Both decimals' coefficients at the smaller exponent of the two. */
function align(first: Decimal, second: Decimal): [bigint, bigint, number] {
  const exponent = Math.min(first.exponent, second.exponent);
  return [
    first.coefficient * 10n ** BigInt(first.exponent - exponent),
    second.coefficient * 10n ** BigInt(second.exponent - exponent),
    exponent,
  ];
}

/** Whether `value` is a whole multiple of `divisor` (a finite number above 0), as decimals. */
export function isMultipleOf(value: number, divisor: number): boolean {
  if (!Number.isFinite(value) || !(divisor > 0) || !Number.isFinite(divisor)) return true;
  // Whole numbers of at most 2^53 divide exactly as they are: the usual case, without BigInt.
  if (Number.isSafeInteger(value) && Number.isSafeInteger(divisor)) return value % divisor === 0;
  const [first, second] = [readDecimal(value), readDecimal(divisor)];
  if (first === undefined || second === undefined) return true;
  const [dividend, by] = align(first, second);
  return dividend % by === 0n;
}

/**
 * The least number that both `first` and `second` (finite numbers above 0) divide, as decimals
 * (`0.1` and `0.25`: `0.5`); `undefined` where it is no finite number.
 */
export function leastCommonMultiple(first: number, second: number): number | undefined {
  const [one, other] = [readDecimal(first), readDecimal(second)];
  if (one === undefined || other === undefined) return undefined;
  const [left, right, exponent] = align(one, other);
  if (left <= 0n || right <= 0n) return undefined;
  const multiple = Number(`${(left / greatestCommonDivisor(left, right)) * right}e${exponent}`);
  return Number.isFinite(multiple) && multiple > 0 ? multiple : undefined;
}

function greatestCommonDivisor(first: bigint, second: bigint): bigint {
  let [left, right] = [first, second];
  while (right !== 0n) [left, right] = [right, left % right];
  return left;
}

/**
 * The decimals a `multipleOf` of 1, 0.1, 0.01, ... (10^−k) allows: `k`; `undefined` for another
 * divisor (0.25, 5), which a grammar does not write.
 */
export function decimalPlacesOf(divisor: number): number | undefined {
  const decimal = readDecimal(divisor);
  if (decimal === undefined || decimal.coefficient !== 1n || decimal.exponent > 0) return undefined;
  return -decimal.exponent;
}
