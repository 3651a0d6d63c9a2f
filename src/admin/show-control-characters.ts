/**
 * C0 controls but tab, line feed and carriage return; DEL; C1 controls; the bidirectional
 * embeddings, overrides and isolates, which reorder how the rest of a line is shown.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves raw of those: DEL, C1 controls and the bidirectional ones. */
const RAW_IN_JSON = /[\u007f-\u009f\u202a-\u202e\u2066-\u2069]/g;

function writeAsEscape(character: string): string {
  return `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/**
 * `text` with its control characters (other than tab and line breaks) written as `\u001b` and the
 * like, as JSON writes them: what a report prints comes partly from API clients (a request's
 * `user`), and an escape sequence printed raw would clear an operator's terminal, retitle its
 * window or recolour what follows, and a right-to-left override would show it reordered.
 */
export function showControlCharacters(text: string): string {
  return text.replace(CONTROL_CHARACTERS, writeAsEscape);
}

/**
 * `JSON.stringify(value)` with the characters it leaves raw that {@link showControlCharacters}
 * escapes (C1 controls, a terminal's 8-bit escapes, and the bidirectional ones) written as
 * `\u009b` and the like: the same JSON, safe to print.
 */
export function stringifyForTerminal(value: unknown): string {
  return JSON.stringify(value).replace(RAW_IN_JSON, writeAsEscape);
}
