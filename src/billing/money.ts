/**
 * Exact money. Inside Tollgate every amount is an integer count of nano-units as a `bigint`
 * (1 currency unit = 1,000,000,000 nano-units); at the edges (config, CLI, JSON) amounts are
 * decimal strings with at most 9 decimal places. No floating-point number ever holds money.
 *
 * A request's cost is `ceil((prompt × input + completion × output) / 1,000,000)` nano-units,
 * where input and output are the prices per million tokens in nano-units: rounded up once per
 * request, and 0 when the request produced no completion token (SPEC §11).
 */
import { hideKeySecrets } from "../admin/read-key-reference.ts";
import { cutText } from "../errors/cut-text.ts";

/** Nano-units in one currency unit. */
export const NANO_PER_UNIT = 1_000_000_000n;

/** Prices are per this many tokens. */
export const TOKENS_PER_PRICE = 1_000_000n;

/** Decimal places an amount may have: one nano-unit is 0.000000001. */
export const MAX_DECIMAL_PLACES = 9;

/**
 * The largest amount accepted from outside, in nano-units: the largest signed 64-bit integer,
 * which both SQL stores hold exactly (about 9.2 billion currency units).
 */
export const MAX_AMOUNT_NANO = 9_223_372_036_854_775_807n;

/** Why a text is not an amount. */
export type MoneyFormatReason =
  | "not_a_string"
  | "empty"
  | "whitespace"
  | "negative"
  | "exponent"
  | "too_many_decimals"
  | "too_large"
  | "not_decimal";

/** A text that is not a valid decimal amount. The message says what is wrong and how to write it. */
export class MoneyFormatError extends Error {
  readonly reason: MoneyFormatReason;
  /** The rejected input, as given. */
  readonly input: unknown;

  constructor(reason: MoneyFormatReason, message: string, input: unknown) {
    super(message);
    this.name = "MoneyFormatError";
    this.reason = reason;
    this.input = input;
  }
}

/** Options of {@link parseAmount}. */
export interface ParseAmountOptions {
  /** What the amount is, for messages ("price", "balance"). Default "amount". */
  noun?: string;
}

const DECIMAL_PATTERN = /^([0-9]+)(?:\.([0-9]+))?$/;
// The point and the digits after it in one optional group: `[0-9]+\.?[0-9]*` could split a run
// of digits between its two parts in every way, quadratic in its length (a 4-million-digit amount
// held the event loop for minutes).
const EXPONENT_PATTERN = /^\+?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][+-]?[0-9]+$/;

/**
 * Reads a decimal string ("0", "12", "0.10", "1.000000001") as nano-units. Throws a
 * {@link MoneyFormatError} for anything else: numbers (they may already have lost precision),
 * negatives, more than 9 decimal places, exponents, signs, spaces, empty or malformed text, and
 * amounts above {@link MAX_AMOUNT_NANO}.
 */
export function parseAmount(text: string, options: ParseAmountOptions = {}): bigint {
  const noun = options.noun ?? "amount";
  const example = `write ${article(noun)} ${noun} such as "0.15"`;
  // The type says string, but amounts arrive from YAML and JSON: refuse numbers loudly.
  if (typeof text !== "string") {
    const got = typeof text === "number" ? `the number ${String(text)}` : `a value of type ${typeof text}`;
    throw new MoneyFormatError(
      "not_a_string",
      `${capitalize(noun)}s must be decimal strings, so quote it: ${example} (got ${got}; numbers are binary floating point and lose precision)`,
      text,
    );
  }
  // An amount never needs 64 characters: a longer text is shown by its start, not echoed whole.
  // A key's secret hidden before the cut, which could leave too little of it to be told.
  const hidden = hideKeySecrets(text);
  const shown = JSON.stringify(hidden.length > 64 ? `${cutText(hidden, 32)}...` : hidden);
  if (text === "") {
    throw new MoneyFormatError("empty", `the ${noun} is empty; ${example}`, text);
  }
  if (/\s/.test(text)) {
    throw new MoneyFormatError("whitespace", `${shown} contains spaces; ${example}`, text);
  }
  if (text.startsWith("-")) {
    // "-0" is zero, not negative: said so ("is negative; amounts are zero or more" contradicted itself).
    const said = /^-0+(\.0*)?$/.test(text)
      ? `${shown} has a minus sign; ${noun}s are zero or more, written without a sign`
      : `${shown} is negative; ${noun}s are zero or more`;
    throw new MoneyFormatError("negative", said, text);
  }
  if (EXPONENT_PATTERN.test(text)) {
    throw new MoneyFormatError(
      "exponent",
      `${shown} uses an exponent; write the ${noun} out in full, such as "0.0000001" or "1000"`,
      text,
    );
  }
  const match = DECIMAL_PATTERN.exec(text);
  if (match === null) {
    throw new MoneyFormatError("not_decimal", `${shown} is not a decimal amount; ${example}`, text);
  }
  // Zeros that change nothing are not digits to refuse ("1.0000000000" is 1) nor to convert.
  const whole = (match[1] ?? "0").replace(/^0+(?=[0-9])/, "");
  const fraction = withoutTrailingZeros(match[2] ?? "");
  if (fraction.length > MAX_DECIMAL_PLACES) {
    throw new MoneyFormatError(
      "too_many_decimals",
      `${shown} has more than ${MAX_DECIMAL_PLACES} decimal places; the smallest ${noun} is "0.000000001"`,
      text,
    );
  }
  // Past 20 digits it is too large without converting: BigInt of millions of digits holds the
  // event loop for a second.
  const nano =
    whole.length > 20
      ? MAX_AMOUNT_NANO + 1n
      : BigInt(whole) * NANO_PER_UNIT + BigInt(fraction.padEnd(MAX_DECIMAL_PLACES, "0"));
  if (nano > MAX_AMOUNT_NANO) {
    throw new MoneyFormatError(
      "too_large",
      `${shown} is too large; the largest ${noun} is "${formatAmount(MAX_AMOUNT_NANO)}"`,
      text,
    );
  }
  return nano;
}

/**
 * `digits` without the zeros at its end, in one pass: `/0+$/` tries a match from every zero of a
 * long run and reads the run again each time (quadratic: a hundred thousand zeros took seconds).
 */
function withoutTrailingZeros(digits: string): string {
  let end = digits.length;
  while (end > 0 && digits.charCodeAt(end - 1) === 48) end -= 1;
  return digits.slice(0, end);
}

/**
 * Writes nano-units as the canonical decimal string: no trailing zeros after the point, no point
 * for whole amounts, "-" before negative amounts ("0", "0.1", "12.000000001", "-3.5").
 */
export function formatAmount(nano: bigint): string {
  const sign = nano < 0n ? "-" : "";
  const magnitude = nano < 0n ? -nano : nano;
  const whole = magnitude / NANO_PER_UNIT;
  const fraction = (magnitude % NANO_PER_UNIT)
    .toString()
    .padStart(MAX_DECIMAL_PLACES, "0")
    .replace(/0+$/, "");
  return fraction === "" ? `${sign}${whole}` : `${sign}${whole}.${fraction}`;
}

/** The token counts and prices of one request. */
export interface UsageCostInput {
  /** Prompt tokens: a non-negative integer. */
  promptTokens: number;
  /** Completion tokens: a non-negative integer; 0 makes the request free. */
  completionTokens: number;
  /** Price per million prompt tokens, in nano-units. */
  inputPerMillionNano: bigint;
  /** Price per million completion tokens, in nano-units. */
  outputPerMillionNano: bigint;
}

/**
 * The cost of one request in nano-units:
 * `ceil((promptTokens × input + completionTokens × output) / 1,000,000)`, and 0 when
 * `completionTokens` is 0 (a request that produced nothing costs nothing). Also gives the
 * maximum cost to reserve when called with the maximum completion tokens (at least 1 token, so
 * not 0 by the rule above; a model priced 0 and 0 reserves 0).
 * Throws a `RangeError` for negative or fractional token counts and negative prices.
 */
export function costOfUsage(input: UsageCostInput): bigint {
  const promptTokens = toTokenCount("promptTokens", input.promptTokens);
  const completionTokens = toTokenCount("completionTokens", input.completionTokens);
  if (input.inputPerMillionNano < 0n || input.outputPerMillionNano < 0n) {
    throw new RangeError("costOfUsage: prices must not be negative");
  }
  if (completionTokens === 0n) return 0n;
  const scaled = promptTokens * input.inputPerMillionNano + completionTokens * input.outputPerMillionNano;
  return divideRoundingUp(scaled, TOKENS_PER_PRICE);
}

function toTokenCount(name: string, value: number): bigint {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`costOfUsage: ${name} must be a non-negative integer (got ${String(value)})`);
  }
  return BigInt(value);
}

/** `ceil(dividend / divisor)` for a non-negative dividend and a positive divisor. */
function divideRoundingUp(dividend: bigint, divisor: bigint): bigint {
  return (dividend + divisor - 1n) / divisor;
}

function article(noun: string): string {
  return /^[aeiou]/i.test(noun) ? "an" : "a";
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
