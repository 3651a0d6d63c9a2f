/**
 * Small readers for validating the parsed YAML tree. Each reader takes the value found at a
 * path, records a problem (with the field path and the fix) when it is wrong, and returns the
 * typed value, or `undefined` when the value is absent or wrong. Validation goes on after a
 * problem so that one run reports every problem in the file.
 */
import { shortenText } from "../errors/cut-text.ts";
import { type ConfigPath, formatConfigPath } from "./config-error.ts";
import { suggestName } from "./suggest-name.ts";

/** A problem found while validating, before it is placed at a line of the file. */
export interface ConfigIssue {
  /** Where in the parsed tree, or `undefined` for an environment variable. */
  path: ConfigPath | undefined;
  /** The field as shown to the operator. */
  field: string;
  message: string;
}

/** Collects the problems of one validation run. */
export class ConfigIssues {
  readonly list: ConfigIssue[] = [];

  /**
   * Records a problem, one per field: the first says what is wrong at the root (a variable that
   * is not set), and what follows from it (the value is then empty) would only repeat it.
   */
  add(path: ConfigPath, message: string): void {
    const field = formatConfigPath(path);
    if (this.list.some((issue) => issue.path !== undefined && issue.field === field)) return;
    this.list.push({ path, field, message });
  }

  /**
   * Records a problem of a key that should not be there (unknown, or in the wrong place) in place
   * of any recorded at it or under it: a variable not set in a key to remove is beside the point
   * (it was said first, and sent the operator to set a variable for a key that is refused then).
   */
  addInPlaceOfAny(path: ConfigPath, message: string): void {
    const isWithin = (other: ConfigPath) =>
      other.length >= path.length && path.every((segment, index) => other[index] === segment);
    const kept = this.list.filter((issue) => issue.path === undefined || !isWithin(issue.path));
    this.list.splice(0, this.list.length, ...kept);
    this.add(path, message);
  }

  addForEnvironment(variable: string, message: string): void {
    this.list.push({ path: undefined, field: `${variable} (environment)`, message });
  }

  get count(): number {
    return this.list.length;
  }
}

/** A YAML mapping as plain data. */
export type ConfigMapping = { [key: string]: unknown };

export function isMapping(value: unknown): value is ConfigMapping {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** True when a key is absent or written with no value (`redis:`). */
export function isAbsent(value: unknown): value is undefined | null {
  return value === undefined || value === null;
}

/** A value as it appears in "(got ...)"; secret strings are never shown. */
export function describeValue(value: unknown, options: { secret?: boolean } = {}): string {
  if (value === undefined || value === null) return "nothing";
  if (typeof value === "string") {
    if (options.secret === true) return "a string";
    return JSON.stringify(shortenText(value));
  }
  // A key written without quotes is a number to YAML: as secret as the string it should be.
  if (typeof value === "number") return options.secret === true ? "a number" : String(value);
  if (typeof value === "boolean") return String(value);
  if (Array.isArray(value)) return "a list";
  if (isMapping(value)) return "a mapping";
  return typeof value;
}

/** Reads a mapping; records a problem when the value is something else. */
export function readMapping(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  example: string,
): ConfigMapping | undefined {
  if (isAbsent(value)) return undefined;
  if (isMapping(value)) return value;
  issues.add(path, `must be a mapping such as ${example} (got ${describeValue(value)})`);
  return undefined;
}

/** Reads a list; records a problem when the value is something else. */
export function readList(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  example: string,
): unknown[] | undefined {
  if (isAbsent(value)) return undefined;
  if (Array.isArray(value)) return value;
  issues.add(path, `must be a list such as ${example} (got ${describeValue(value)})`);
  return undefined;
}

/**
 * Records a problem for every key not in `known`, with a "did you mean" where one is close.
 * `hints` replaces the message for keys that have a known better place.
 */
export function checkKnownKeys(
  issues: ConfigIssues,
  path: ConfigPath,
  mapping: ConfigMapping,
  known: readonly string[],
  hints: Readonly<Record<string, string>> = {},
): void {
  for (const key of Object.keys(mapping)) {
    if (known.includes(key)) continue;
    // Own hints only: `valueOf: 1` was told Object.prototype's function as its hint.
    const hint = Object.hasOwn(hints, key) ? hints[key] : undefined;
    if (hint !== undefined) {
      issues.addInPlaceOfAny([...path, key], hint);
      continue;
    }
    const suggestion = suggestName(key, known);
    issues.addInPlaceOfAny(
      [...path, key],
      suggestion === undefined
        ? `unknown key; remove it (allowed here: ${known.join(", ")})`
        : `unknown key; did you mean "${suggestion}"?`,
    );
  }
}

/** Reads a string; numbers and booleans are refused rather than converted. */
export function readString(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  options: { example: string; secret?: boolean; allowEmpty?: boolean },
): string | undefined {
  if (isAbsent(value)) return undefined;
  if (typeof value !== "string") {
    issues.add(path, `must be a string such as ${options.example} (got ${describeValue(value, options)})`);
    return undefined;
  }
  if (value === "" && options.allowEmpty !== true) {
    issues.add(path, `must not be empty; write a value such as ${options.example}`);
    return undefined;
  }
  return value;
}

/**
 * Reads an integer from `min` to `max`. A string of digits counts (it is what `${VAR}`
 * gives); fractions and other text do not.
 */
export function readInteger(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  range: { min: number; max: number },
): number | undefined {
  if (isAbsent(value)) return undefined;
  const number = typeof value === "string" && /^[0-9]+$/.test(value) ? Number(value) : value;
  if (
    typeof number === "number" &&
    Number.isSafeInteger(number) &&
    number >= range.min &&
    number <= range.max
  ) {
    return number;
  }
  issues.add(path, `must be ${describeIntegerRange(range)} (got ${describeValue(value)})`);
  return undefined;
}

/** Reads true or false (also the strings "true" and "false", which `${VAR}` gives). */
export function readBoolean(issues: ConfigIssues, path: ConfigPath, value: unknown): boolean | undefined {
  if (isAbsent(value)) return undefined;
  if (value === true || value === "true") return true;
  if (value === false || value === "false") return false;
  issues.add(path, `must be true or false (got ${describeValue(value)})`);
  return undefined;
}

/** Reads one of a few allowed strings. */
export function readChoice<Choice extends string>(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  choices: readonly Choice[],
): Choice | undefined {
  if (isAbsent(value)) return undefined;
  const match = choices.find((choice) => choice === value);
  if (match !== undefined) return match;
  const suggestion = typeof value === "string" ? suggestName(value, choices) : undefined;
  const hint = suggestion === undefined ? "" : `; did you mean "${suggestion}"?`;
  issues.add(path, `must be one of ${choices.join(", ")} (got ${describeValue(value)})${hint}`);
  return undefined;
}

function describeIntegerRange(range: { min: number; max: number }): string {
  if (range.max >= Number.MAX_SAFE_INTEGER) {
    return range.min === 1 ? "a positive integer" : `an integer of at least ${range.min}`;
  }
  return `an integer from ${range.min} to ${range.max}`;
}

/** True when `text` has a control character other than tab: HTTP header values cannot carry them. */
function hasControlCharacter(text: string): boolean {
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if ((code < 32 && code !== 9) || code === 127) return true;
  }
  return false;
}

/**
 * Why `value` cannot be sent as (or compared with) an HTTP header value, or `undefined` when it
 * can. HTTP drops spaces around a value, so a key with them would never match; a trailing
 * newline is the usual one, copied from a file or a variable. Never repeats the value.
 */
export function describeHeaderValueProblem(value: string): string | undefined {
  if (hasControlCharacter(value))
    return "contains a line break or another control character, which HTTP headers cannot carry (often a trailing newline copied from a file); remove it";
  if (value.trim() !== value)
    return "starts or ends with spaces, which HTTP drops from header values; remove them";
  // Node sends a header's characters as single bytes and refuses any beyond them: every request
  // with it failed as if the upstream could not be reached.
  if (/[\u0100-\uffff]/.test(value))
    return "has a character beyond Latin-1 (such as € or a letter of another script), which HTTP headers cannot carry; use the value as the provider gave it, or percent-encode what the upstream decodes";
  return undefined;
}

/**
 * Why a key clients send as a bearer token (admin_key, metrics_key) could never match, or
 * `undefined`: a header's bytes reach the server as Latin-1, so a key with other characters
 * (UTF-8 from curl or Prometheus) is never equal to the one configured, and every request with
 * it would be refused. Never repeats the value.
 */
export function describeBearerKeyProblem(key: string): string | undefined {
  return /^[\x20-\x7e\t]*$/.test(key)
    ? undefined
    : "has characters outside ASCII, which HTTP clients send in another encoding than the server compares: no request could use it; use ASCII letters, digits and punctuation";
}

/** Reads a string sent in an HTTP header (a key): {@link readString}, then {@link describeHeaderValueProblem}. */
export function readHeaderValue(
  issues: ConfigIssues,
  path: ConfigPath,
  value: unknown,
  options: { example: string; secret?: boolean; allowEmpty?: boolean },
): string | undefined {
  const text = readString(issues, path, value, options);
  if (text === undefined) return undefined;
  const problem = describeHeaderValueProblem(text);
  if (problem === undefined) return text;
  issues.add(path, problem);
  return undefined;
}
