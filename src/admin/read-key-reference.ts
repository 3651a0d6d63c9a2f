import { isPublicId, parseApiKey, verifySecret } from "../auth/api-key.ts";
import { shortenText } from "../errors/cut-text.ts";
import type { Store } from "../store/store.ts";
import { AdminError } from "./admin-error.ts";

/** What to write instead of text that names no key: never the text, which may be a mistyped secret. */
const KEY_REFERENCE_HINT =
  "Name the key by its public id (12 lowercase letters and digits, the part after `sk-tg-`) or give the whole key.";

/**
 * The public id of the key `text` names (a public id as it is, or a whole key's public id); given whole, its secret
 * must be the stored one: a whole key whose secret differed (a character lost or changed in a
 * copy) named the key all the same, and was revoked or changed. Throws `invalid_value` for text
 * that names no key and for a secret that differs; a key that does not exist is the caller's to
 * refuse.
 */
export async function resolveKeyReference(
  store: Pick<Store, "getApiKeyByPublicId">,
  text: string,
): Promise<string> {
  const trimmed = text.trim();
  const whole = parseApiKey(trimmed);
  const publicId = whole?.publicId ?? (isPublicId(trimmed) ? trimmed : undefined);
  if (publicId === undefined) throw new AdminError("invalid_value", KEY_REFERENCE_HINT, { field: "key" });
  if (whole !== undefined) {
    const record = await store.getApiKeyByPublicId(publicId);
    if (record !== undefined && !verifySecret(whole.secret, record.secretHash)) {
      throw new AdminError(
        "invalid_value",
        `The key given is not key ${publicId}: its secret differs from the stored one (a character lost or changed in the copy?). Give the whole key as it was printed, or its public id alone.`,
        { field: "key" },
      );
    }
  }
  return publicId;
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
