/**
 * The largest integer a JSON grammar writes: 15 digits (see patch-grammar-terminals.ts), so that
 * every integer it writes is a safe one.
 */
export const largestGrammarInteger = 10 ** 15 - 1;

/**
 * A GBNF expression that matches exactly the JSON texts of the integers from `minimum` to
 * `maximum` (both whole numbers within ±{@link largestGrammarInteger}, `minimum` at most
 * `maximum`), written as JSON writes them: no leading zeros, no `-0`, no fraction or exponent.
 *
 * The integers are split by sign, then by their number of digits; within one number of digits,
 * each alternative starts with a different digit, so llama.cpp follows one of them, and the lengths
 * whose every number is in range share one `[1-9] [0-9]{m,n}`: a range opens at most a few
 * alternatives at once, however wide (as llama.cpp's own json-schema-to-grammar bounds integers).
 */
export function integerRangeGrammar(minimum: number, maximum: number): string {
  if (
    !Number.isInteger(minimum) ||
    !Number.isInteger(maximum) ||
    minimum > maximum ||
    Math.abs(minimum) > largestGrammarInteger ||
    Math.abs(maximum) > largestGrammarInteger
  )
    throw new RangeError(`no integer grammar for ${minimum} to ${maximum}`);
  const alternatives: string[] = [];
  if (maximum >= 0) alternatives.push(naturalRange(Math.max(minimum, 0), maximum));
  if (minimum < 0) alternatives.push(`"-" ${naturalRange(Math.max(1, -maximum), -minimum)}`);
  return group(alternatives);
}

/** The numbers `low` to `high` (0 or more), by number of digits. */
function naturalRange(low: number, high: number): string {
  const alternatives: string[] = [];
  /** Consecutive lengths whose every number is in range: [first, last] digits. */
  let full: [number, number] | undefined;
  const closeFull = () => {
    if (full === undefined) return;
    const [first, last] = full;
    alternatives.push(`[1-9] ${repeat("[0-9]", first - 1, last - 1)}`.trimEnd());
    full = undefined;
  };
  // Zero alone: then the numbers of one digit are 1 to 9, and the lengths run alike.
  if (low === 0) alternatives.push('"0"');
  const first = Math.max(low, 1);
  for (let length = String(first).length; length <= String(high).length; length++) {
    const lengthLow = 10 ** (length - 1);
    const lengthHigh = 10 ** length - 1;
    const from = Math.max(first, lengthLow);
    const to = Math.min(high, lengthHigh);
    if (from > to) continue;
    if (from === lengthLow && to === lengthHigh) {
      full = full === undefined ? [length, length] : [full[0], length];
      continue;
    }
    closeFull();
    alternatives.push(between(String(from), String(to)));
  }
  closeFull();
  return group(alternatives);
}

/** The digit strings of one length from `low` to `high`. */
function between(low: string, high: string): string {
  if (low === high) return `"${low}"`;
  const first = Number(low[0]);
  const last = Number(high[0]);
  const restLow = low.slice(1);
  const restHigh = high.slice(1);
  if (first === last) return `"${first}" ${between(restLow, restHigh)}`;
  const fromZeros = /^0*$/.test(restLow);
  const toNines = /^9*$/.test(restHigh);
  const alternatives: string[] = [];
  if (!fromZeros) alternatives.push(`"${first}" ${atLeast(restLow)}`);
  const classLow = fromZeros ? first : first + 1;
  const classHigh = toNines ? last : last - 1;
  if (classLow <= classHigh)
    alternatives.push(sequence(digitClass(classLow, classHigh), digits(restLow.length)));
  if (!toNines) alternatives.push(`"${last}" ${atMost(restHigh)}`);
  return group(alternatives);
}

/** The digit strings of the length of `low` from `low` up. */
function atLeast(low: string): string {
  if (/^0*$/.test(low)) return digits(low.length);
  const first = Number(low[0]);
  const alternatives = [`"${first}" ${atLeast(low.slice(1))}`.trimEnd()];
  if (first < 9) alternatives.push(sequence(digitClass(first + 1, 9), digits(low.length - 1)));
  return group(alternatives);
}

/** The digit strings of the length of `high` up to `high`. */
function atMost(high: string): string {
  if (/^9*$/.test(high)) return digits(high.length);
  const first = Number(high[0]);
  const alternatives = [`"${first}" ${atMost(high.slice(1))}`.trimEnd()];
  if (first > 0) alternatives.push(sequence(digitClass(0, first - 1), digits(high.length - 1)));
  return group(alternatives);
}

function digitClass(low: number, high: number): string {
  return low === high ? `"${low}"` : `[${low}-${high}]`;
}

function digits(count: number): string {
  return repeat("[0-9]", count, count);
}

function repeat(item: string, least: number, most: number): string {
  if (most === 0) return "";
  if (least === most) return least === 1 ? item : `${item}{${least}}`;
  return `${item}{${least},${most}}`;
}

function sequence(...parts: string[]): string {
  return parts.filter((part) => part !== "").join(" ");
}

function group(alternatives: readonly string[]): string {
  return alternatives.length === 1 ? (alternatives[0] as string) : `(${alternatives.join(" | ")})`;
}
