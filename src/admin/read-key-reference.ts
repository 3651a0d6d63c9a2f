import { isPublicId, parseApiKey } from "../auth/api-key.ts";
import { shortenText } from "../errors/cut-text.ts";

/** What to write instead of text that names no key: never the text, which may be a mistyped secret. */
export const KEY_REFERENCE_HINT =
  "Name the key by its public id (12 lowercase letters and digits, the part after `sk-tg-`) or give the whole key.";

/**
 * The public id an operator's key reference names: a public id as it is, or a whole key's public
 * id (its secret goes no further). `undefined` when the text is neither.
 */
export function readKeyReference(text: string): string | undefined {
  const trimmed = text.trim();
  return parseApiKey(trimmed)?.publicId ?? (isPublicId(trimmed) ? trimmed : undefined);
}

/** `sk-tg-`, what follows up to the next `-`, then what looks like a secret after it. */
const KEY_WITH_SECRET = /(sk-tg-[A-Za-z0-9]*)-[A-Za-z0-9]{8,}/g;

/**
 * The text with the secret of every key in it hidden (`sk-tg-abc123def456-...`), for messages
 * that repeat what an operator typed: a key pasted where something else was expected must not
 * end up in a terminal's scrollback, a CI log or an HTTP error body.
 */
export function hideKeySecrets(text: string): string {
  return text.replace(KEY_WITH_SECRET, "$1-...");
}

/**
 * What an operator typed, as a message repeats it: every key's secret hidden, then cut to at
 * most `maxUnits` (see {@link shortenText}). In that order: a cut first could leave the first 1
 * to 7 characters of a secret, too few for {@link hideKeySecrets} to tell them from a word.
 */
export function showTyped(text: string, maxUnits = 80): string {
  return shortenText(hideKeySecrets(text), maxUnits);
}
