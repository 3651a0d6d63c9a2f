import { boundedTimeRule, patchGrammarDefinitions } from "./patch-grammar-definitions.ts";

/**
 * Four of node-llama-cpp's JSON grammar terminals let out values that strict readers refuse. This
 * rewrites their rules, once per process, in the classes every JSON grammar is built from (ours
 * through create-json-grammar.ts, LlamaChat's for function parameters, the "any JSON value" rule).
 * A rule that differs from the one shipped is left as it is; node-llama-cpp is pinned to one
 * version, and patch-grammar-terminals.test.ts pins the rules and fails if a new version moves them.
 *
 * Numbers: an exponent of up to 16 digits let "74786006.86E2378147571108908" (Infinity once
 * parsed) come out of json_schema and json_object output and of tool-call arguments alike, and an
 * `integer` could be "5e-3" (no integer) or have 16 digits (past `Number.MAX_SAFE_INTEGER`). Now:
 * - an integer has at most 15 digits and no fraction or exponent: always a safe integer;
 * - any other number keeps its 16 digits and 16 decimals and may have an exponent of at most two
 *   digits: always a finite double (below 1e116). The exponent stays because a model that means
 *   6.02e23 could not write it out in 16 digits.
 *
 * Dates (`format: "date"`, and the date of `date-time`): any month could have 31 days, so
 * "2023-02-31" and "2023-11-31" came out. Now each month has its own days, and February 29 only
 * in leap years (of the proleptic Gregorian calendar, as RFC 3339 reads them).
 *
 * Times (`format: "time"`, and the time of `date-time`): any of `Z` or an offset ended them, and
 * zod, whose helpers (the `openai` SDK's `zodResponseFormat`, `zodFunction`) read the answers of
 * most strict-output clients, refuses most of them: `.datetime()` and zod 4's `iso.datetime()`
 * take `Z` only, `.time()` and `iso.time()` no zone at all (zod 4 sends that as the `pattern`
 * beside the format, which the format wins over). Now a `date-time` ends in `Z` (UTC; RFC 3339
 * and every reader take it); a `time` has no zone, as zod and pydantic take it; RFC
 * 3339's full-time and ajv-formats 3's `time` want one (its `iso-time` takes either), and zod
 * refuses one: zod reads most answers (docs/structured-output.md). It is written by a grammar of ours
 * (patch-grammar-definitions.ts), as node-llama-cpp's check of tool-call arguments wants a zone in
 * one of its own `time` format.
 *
 * Literal strings (`enum` and `const` values, property names): only `\ " \t \r \n` were escaped,
 * so "\u0001", "\b" or "\f" came out raw inside the JSON string (which JSON.parse refuses), and a
 * NUL cut the grammar text short (llama.cpp reads it as a C string) so the schema was refused. Now
 * the literal is the value's JSON text exactly as `JSON.stringify` writes it (`\b \f \u0001`, lone
 * surrogates as `\ud800`), so the output parses back to the very value and the grammar text holds
 * no control character.
 */
const shippedRules = {
  integer: '"-"? ("0" | [1-9] [0-9]{0,15}) ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
  fractional: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]{0,15}))?',
};

const boundedRules = {
  integer: '"-"? ("0" | [1-9] [0-9]{0,14})',
  fractional: '"-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]?))?',
};

const shippedDateRule = '[0-9]{4} "-" ("0" [1-9] | "1" [012]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])';

const shippedTimeRule =
  '([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{3} )? ("Z" | ("+" | "-") ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])';

/** Two-digit endings of leap years (a multiple of 4 but not 00), and centuries that are leap years. */
const LEAP_YEAR =
  '([0-9] [0-9] ("0" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) "00")';

const boundedDateRule = [
  "(",
  '[0-9]{4} "-" (',
  '("0" [13578] | "1" [02]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])',
  '| ("0" [469] | "11") "-" ("0" [1-9] | [12] [0-9] | "30")',
  '| "02-" ("0" [1-9] | "1" [0-9] | "2" [0-8])',
  `) | ${LEAP_YEAR} "-02-29"`,
  ")",
].join(" ");

/** The grammar node-llama-cpp writes for the literal string `value` (the pinned version's escaping). */
function shippedStringRule(value: string): string {
  const escaped = value
    .replaceAll("\\", "\\\\\\\\")
    .replaceAll("\t", "\\\\t")
    .replaceAll("\r", "\\\\r")
    .replaceAll("\n", "\\\\n")
    .replaceAll('"', '\\\\\\"');
  return `"\\"${escaped}\\""`;
}

/** A GBNF literal that matches exactly the JSON text of `value`: its backslashes and quotes escaped. */
function jsonStringRule(value: string): string {
  return `"${JSON.stringify(value).replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

interface GbnfNumberClass {
  prototype: { allowFractional: boolean; getGrammar(): string };
}

interface GbnfStringValueClass {
  prototype: { value: string; getGrammar(): string };
}

interface GbnfFormatStringClass {
  prototype: { format: string; _getDateGrammar(): string; _getTimeGrammar(): string };
}

/**
 * A terminal module as node-llama-cpp loads it (same file URL, same instance); a file URL is not
 * subject to the package's exports map, which does not list it.
 */
async function importTerminal(file: string): Promise<unknown> {
  return await import(
    new URL(`./utils/gbnfJson/terminals/${file}`, import.meta.resolve("node-llama-cpp")).href
  );
}

async function patchNumbers(): Promise<boolean> {
  const { GbnfNumber } = (await importTerminal("GbnfNumber.js")) as { GbnfNumber: GbnfNumberClass };
  const original = GbnfNumber.prototype.getGrammar;
  if (typeof original !== "function") return false;
  GbnfNumber.prototype.getGrammar = function getGrammar(this: { allowFractional: boolean }) {
    const grammar = original.call(this);
    const kind = this.allowFractional ? "fractional" : "integer";
    return grammar === shippedRules[kind] ? boundedRules[kind] : grammar;
  };
  return true;
}

async function patchDates(): Promise<boolean> {
  const { GbnfFormatString } = (await importTerminal("GbnfFormatString.js")) as {
    GbnfFormatString: GbnfFormatStringClass;
  };
  const original = GbnfFormatString.prototype._getDateGrammar;
  if (typeof original !== "function") return false;
  GbnfFormatString.prototype._getDateGrammar = function getDateGrammar(this: unknown) {
    const grammar = original.call(this);
    return grammar === shippedDateRule ? boundedDateRule : grammar;
  };
  const originalTime = GbnfFormatString.prototype._getTimeGrammar;
  if (typeof originalTime !== "function") return false;
  GbnfFormatString.prototype._getTimeGrammar = function getTimeGrammar(this: { format: string }) {
    const grammar = originalTime.call(this);
    // A `time` is written by a grammar of ours (patch-grammar-definitions.ts): node-llama-cpp's
    // check of tool-call arguments wants a zone in one of its own format.
    return grammar === shippedTimeRule && this.format === "date-time" ? `${boundedTimeRule} "Z"` : grammar;
  };
  return true;
}

async function patchStringValues(): Promise<boolean> {
  const { GbnfStringValue } = (await importTerminal("GbnfStringValue.js")) as {
    GbnfStringValue: GbnfStringValueClass;
  };
  const original = GbnfStringValue.prototype.getGrammar;
  if (typeof original !== "function") return false;
  GbnfStringValue.prototype.getGrammar = function getGrammar(this: { value: string }) {
    const grammar = original.call(this);
    return grammar === shippedStringRule(this.value) ? jsonStringRule(this.value) : grammar;
  };
  return true;
}

let patching: Promise<boolean> | undefined;

/**
 * Patches the number, date and time, and literal string terminals and the `$ref` one (see
 * patch-grammar-definitions.ts); answers whether all four could be (else
 * those that could not are as shipped).
 */
export function patchGrammarTerminals(): Promise<boolean> {
  patching ??= (async () => {
    const [numbers, dates, strings, definitions] = await Promise.all([
      patchNumbers().catch(() => false),
      patchDates().catch(() => false),
      patchStringValues().catch(() => false),
      // Grammars the conversion writes itself: `format: "uuid"`, integer ranges.
      patchGrammarDefinitions().catch(() => false),
    ]);
    return numbers && dates && strings && definitions;
  })();
  return patching;
}
