import { readDecimal } from "./decimal-multiples.ts";
import { integerRangeGrammar, largestGrammarInteger } from "./integer-range-grammar.ts";
import type { NumberBound, NumberBounds } from "./number-bounds.ts";

/**
 * The numbers a grammar writes within a fractional number's bounds: those with at most 15
 * significant digits (a whole part of `wholeDigits` digits at most, then at most
 * `fractionDigits` = 15 − `wholeDigits` after the point), no exponent, from `low` to `high`
 * counted in units of the last fraction digit (10^−`fractionDigits`), both included.
 *
 * Fifteen digits keep the decimal text and the double a reader parses it to in the same order
 * against any bound: two decimals of 15 significant digits never parse to the same double, and a
 * bound's shortest text (JavaScript's `String(bound)`, which is what is compared) parses back to
 * the bound. So a text above the bound's text parses above the bound, and an exclusive bound
 * holds in the reader too. A bound between two such numbers is rounded inward.
 */
export interface DecimalRange {
  low: bigint;
  high: bigint;
  fractionDigits: number;
}

/** The widest whole part a bound on one side only leaves: nine digits (prices, counts, scores). */
const oneSidedLargest = 999_999_999;

/**
 * The range `bounds` leave for numbers of at most 15 significant digits, or `undefined` when none
 * of them is within the bounds. A side without a bound reaches nine digits, or one digit beyond
 * the other side's bound; a bound beyond 15 digits is as none on its own side (a `maximum` of
 * 1e20), and leaves nothing on the other (a `minimum` of 1e20).
 */
export function decimalRange(
  { low, high }: NumberBounds,
  /** The most decimals a `multipleOf` (0.01: 2) allows. */
  decimalPlaces = Number.POSITIVE_INFINITY,
): DecimalRange | undefined {
  if ((low?.value ?? 0) > largestGrammarInteger || (high?.value ?? 0) < -largestGrammarInteger)
    return undefined;
  const reach = (bound: NumberBound | undefined) =>
    bound === undefined || Math.abs(bound.value) > largestGrammarInteger ? undefined : bound;
  const [lowest, highest] = [reach(low), reach(high)];
  const otherSide = Math.max(Math.abs(lowest?.value ?? 0), Math.abs(highest?.value ?? 0));
  const largestWhole =
    lowest !== undefined && highest !== undefined
      ? Math.floor(otherSide)
      : Math.min(largestGrammarInteger, Math.max(oneSidedLargest, Math.floor(otherSide) * 10 + 9));
  const fractionDigits = Math.min(15 - String(Math.max(1, largestWhole)).length, decimalPlaces);
  const unit = 10n ** BigInt(fractionDigits);
  const widest = (BigInt(largestWhole) + 1n) * unit - 1n;
  const from = lowest === undefined ? -widest : scaled(lowest, fractionDigits, "up");
  const to = highest === undefined ? widest : scaled(highest, fractionDigits, "down");
  const range = { low: from < -widest ? -widest : from, high: to > widest ? widest : to, fractionDigits };
  return range.low > range.high ? undefined : range;
}

/**
 * `bound` in units of 10^−`digits`, rounded inward (`up` for a lower bound): the nearest such
 * number the bound lets in, one unit further where an exclusive bound falls on one.
 */
function scaled(bound: NumberBound, digits: number, direction: "up" | "down"): bigint {
  const decimal = readDecimal(bound.value);
  if (decimal === undefined) throw new RangeError(`not a finite number: ${bound.value}`);
  // The bound in units is `mantissa` × 10^`power`, exactly.
  const mantissa = decimal.coefficient;
  const power = decimal.exponent + digits;
  let units: bigint;
  let exact = true;
  if (power >= 0) units = mantissa * 10n ** BigInt(power);
  else {
    const divisor = 10n ** BigInt(-power);
    units = mantissa / divisor;
    const rest = mantissa % divisor;
    exact = rest === 0n;
    // BigInt division truncates toward zero: round toward the inside of the range.
    if (!exact && direction === "up" && mantissa > 0n) units += 1n;
    if (!exact && direction === "down" && mantissa < 0n) units -= 1n;
  }
  if (exact && bound.exclusive) units += direction === "up" ? 1n : -1n;
  return units;
}

/**
 * A GBNF expression that matches exactly the JSON texts of the numbers of `range`: an optional
 * `-`, a whole part as JSON writes it, then a point and 1 to `fractionDigits` digits, or none
 * (`-0` only where 0 is in range, never alone below it). Within one whole part, the fraction is
 * written digit by digit against the bounds' digits, so llama.cpp follows one alternative or two.
 */
export function decimalRangeGrammar({ low, high, fractionDigits }: DecimalRange): string {
  const alternatives: string[] = [];
  if (high >= 0n) alternatives.push(magnitude(low > 0n ? low : 0n, high, fractionDigits));
  if (low < 0n) alternatives.push(`"-" ${magnitude(high < -1n ? -high : 1n, -low, fractionDigits)}`);
  return group(alternatives);
}

/** The non-negative numbers from `low` to `high` units. */
function magnitude(low: bigint, high: bigint, fractionDigits: number): string {
  if (fractionDigits === 0) return integerRangeGrammar(Number(low), Number(high));
  const unit = 10n ** BigInt(fractionDigits);
  const [lowWhole, highWhole] = [low / unit, high / unit];
  const pad = (units: bigint) => String(units % unit).padStart(fractionDigits, "0");
  const [lowFraction, highFraction] = [met(pad(low), "0"), met(pad(high), "9")];
  const alternatives: string[] = [];
  const withFraction = (whole: bigint, fraction: string | undefined) => {
    if (fraction !== undefined) alternatives.push(`"${whole}" ${fraction}`.trimEnd());
  };
  if (lowWhole === highWhole) {
    withFraction(lowWhole, fractionPart(lowFraction, highFraction, fractionDigits));
  } else {
    withFraction(lowWhole, fractionPart(lowFraction, undefined, fractionDigits));
    if (lowWhole + 1n <= highWhole - 1n)
      alternatives.push(
        `${integerRangeGrammar(Number(lowWhole + 1n), Number(highWhole - 1n))} ("." [0-9]{1,${fractionDigits}})?`,
      );
    withFraction(highWhole, fractionPart(undefined, highFraction, fractionDigits));
  }
  return group(alternatives);
}

/**
 * After a whole part: nothing, or a point and digits, between the fraction digits `low` and
 * `high` (each `fractionDigits` long; `undefined`: no bound on that side). `undefined` when no
 * fraction, not even none, is within them.
 */
function fractionPart(
  low: string | undefined,
  high: string | undefined,
  fractionDigits: number,
): string | undefined {
  const noneFits = low === undefined;
  const digits = fractionDigitsGrammar(low, high, fractionDigits, true);
  if (digits === undefined) return noneFits ? "" : undefined;
  const written = `"." ${digits}`;
  return noneFits ? `(${written})?` : written;
}

/**
 * Digit strings of up to `left` digits (at least one when `first`) that, read as the rest of a
 * fraction, are at least `low`'s and at most `high`'s remaining digits (`undefined`: that side is
 * met already). A digit above `low`'s next one frees the lower side, one below `high`'s the upper.
 */
function fractionDigitsGrammar(
  low: string | undefined,
  high: string | undefined,
  left: number,
  first: boolean,
): string | undefined {
  // Ending here leaves zeros: enough for the lower side only once it is met.
  const canEnd = !first && low === undefined;
  if (low === undefined && high === undefined) {
    if (left === 0) return first ? undefined : "";
    return `[0-9]{${first ? 1 : 0},${left}}`;
  }
  const alternatives: string[] = [];
  if (left > 0) {
    // Digits in runs that lead to the same state: one class each.
    let run: { from: number; to: number; low: string | undefined; high: string | undefined } | undefined;
    const flush = () => {
      if (run === undefined) return;
      const rest = fractionDigitsGrammar(run.low, run.high, left - 1, false);
      const digitClass = run.from === run.to ? `"${run.from}"` : `[${run.from}-${run.to}]`;
      if (rest !== undefined) alternatives.push(`${digitClass} ${rest}`.trimEnd());
      run = undefined;
    };
    for (let digit = 0; digit <= 9; digit++) {
      const next = step(low, high, digit);
      if (next === undefined) {
        flush();
        continue;
      }
      if (run !== undefined && run.low === next.low && run.high === next.high && run.to === digit - 1)
        run.to = digit;
      else {
        flush();
        run = { from: digit, to: digit, ...next };
      }
    }
    flush();
  }
  if (alternatives.length === 0) return canEnd ? "" : undefined;
  const body = group(alternatives);
  return canEnd ? `${alternatives.length === 1 ? `(${body})` : body}?` : body;
}

/** The bounds' digits left after `digit`, or `undefined` when `digit` leaves the range. */
function step(
  low: string | undefined,
  high: string | undefined,
  digit: number,
): { low: string | undefined; high: string | undefined } | undefined {
  const lowDigit = low === undefined ? undefined : Number(low[0] ?? "0");
  const highDigit = high === undefined ? undefined : Number(high[0] ?? "0");
  if (lowDigit !== undefined && digit < lowDigit) return undefined;
  if (highDigit !== undefined && digit > highDigit) return undefined;
  return {
    low: lowDigit === undefined || digit > lowDigit ? undefined : met((low as string).slice(1), "0"),
    high: highDigit === undefined || digit < highDigit ? undefined : met((high as string).slice(1), "9"),
  };
}

/**
 * A bound's digits left, or `undefined` where every string meets them: a lower bound's zeros (no
 * fraction is below), an upper bound's nines (none of the digits left is above).
 */
function met(digits: string, every: "0" | "9"): string | undefined {
  for (const digit of digits) if (digit !== every) return digits;
  return undefined;
}

function group(alternatives: readonly string[]): string {
  return alternatives.length === 1 ? (alternatives[0] as string) : `(${alternatives.join(" | ")})`;
}
