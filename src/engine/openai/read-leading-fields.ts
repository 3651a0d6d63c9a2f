/** The fields read from the start of a JSON object that does not parse whole. */
export interface LeadingFields {
  /** Each field whose value is a string (or a number, as its text), as far as they came. */
  fields: Record<string, string>;
  /** The field whose string the text ended inside of (a body cut short): its value is its start. */
  cutField: string | undefined;
}

/**
 * The fields at the start of a JSON object that does not parse (a body cut at the bound it is
 * read to, or malformed): an upstream's error says what matters first (OpenAI's
 * `{"error": {"message": ..., "type": ..., ...}}`), and a stack trace or an echo of the request
 * that makes it too long comes after. Read are the object's first fields, or those of an
 * `error` object it begins with (an `error` that is a string reads as `message`), one after the
 * other while they are strings, numbers, `true`, `false` or `null`, up to the first that is
 * anything else (an object, a list) or broken. One pass over the text, with no recursion: a
 * body of any length or shape costs time in proportion to its length and nothing more.
 */
export function readLeadingFields(text: string): LeadingFields {
  const scan: Scan = { text, at: 0 };
  const result: LeadingFields = { fields: {}, cutField: undefined };
  if (!take(scan, "{")) return result;
  const start = scan.at;
  if (readKey(scan) === "error") {
    if (take(scan, "{")) return readFields(scan, result);
    const message = readString(scan);
    if (message !== undefined) {
      result.fields.message = message.value;
      if (!message.complete) result.cutField = "message";
    }
    return result;
  }
  scan.at = start;
  return readFields(scan, result);
}

interface Scan {
  readonly text: string;
  /** Where the next token begins (or white space before it). */
  at: number;
}

/** Reads `"key": value` pairs, separated by commas, into `result` while they are simple values. */
function readFields(scan: Scan, result: LeadingFields): LeadingFields {
  for (let first = true; ; first = false) {
    if (!first && !take(scan, ",")) return result;
    const key = readKey(scan);
    if (key === undefined) return result;
    skipSpace(scan);
    if (scan.text[scan.at] === '"') {
      const value = readString(scan);
      if (value === undefined) return result;
      result.fields[key] = value.value;
      if (!value.complete) {
        result.cutField = key;
        return result;
      }
      continue;
    }
    const literal = /^(?:-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)/.exec(
      scan.text.slice(scan.at, scan.at + 32),
    );
    // A literal at the very end may be cut (`12` of `1234`): not read.
    if (literal === null || scan.at + literal[0].length >= scan.text.length) return result;
    if (/^-?\d/.test(literal[0])) result.fields[key] = literal[0];
    scan.at += literal[0].length;
  }
}

/** A key and its colon; `undefined` when the text holds no (whole) key there. */
function readKey(scan: Scan): string | undefined {
  const key = readString(scan);
  if (key === undefined || !key.complete || !take(scan, ":")) return undefined;
  return key.value;
}

/**
 * A JSON string at `scan.at` (after white space): its value, and whether it ended before the
 * text did. A string the text ends inside of has the escape it ends inside of dropped.
 * `undefined` when there is no string there, or it is not valid JSON.
 */
function readString(scan: Scan): { value: string; complete: boolean } | undefined {
  skipSpace(scan);
  const { text } = scan;
  if (text[scan.at] !== '"') return undefined;
  const start = scan.at + 1;
  let at = start;
  let complete = false;
  while (at < text.length) {
    const code = text.charCodeAt(at);
    if (code === 0x22) {
      complete = true;
      break;
    }
    if (code === 0x5c) {
      const length = text[at + 1] === "u" ? 6 : 2;
      if (at + length > text.length) break;
      at += length;
    } else at++;
  }
  let value: unknown;
  try {
    value = JSON.parse(`"${text.slice(start, at)}"`);
  } catch {
    return undefined;
  }
  scan.at = complete ? at + 1 : text.length;
  // A cut may split a surrogate pair written as is, or as two escapes.
  return typeof value === "string" ? { value: value.toWellFormed(), complete } : undefined;
}

/** Takes `token` after white space; false (nothing taken but the white space) when it is not there. */
function take(scan: Scan, token: string): boolean {
  skipSpace(scan);
  if (scan.text[scan.at] !== token) return false;
  scan.at++;
  return true;
}

function skipSpace(scan: Scan): void {
  while (scan.at < scan.text.length && /[ \t\n\r]/.test(scan.text[scan.at] as string)) scan.at++;
}
