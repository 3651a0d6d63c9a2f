import { hash, randomBytes, timingSafeEqual } from "node:crypto";

/**
 * API keys look like `sk-tg-<publicId>-<secret>`:
 * - `publicId`: 12 characters `[a-z0-9]`, stored in clear, used to find the key and safe to
 *   show in listings and logs;
 * - `secret`: 43 base62 characters (about 256 bits) from `crypto.randomBytes`; only its SHA-256
 *   is stored, and a presented secret is compared to it in constant time.
 * A key is shown once, when it is made.
 */

/** Every key starts with this. */
export const API_KEY_PREFIX = "sk-tg-";

/** Length of the public id. */
export const PUBLIC_ID_LENGTH = 12;

/** Length of the secrets Tollgate makes; parsing accepts 32 to {@link MAX_SECRET_LENGTH}. */
export const SECRET_LENGTH = 43;

const MIN_SECRET_LENGTH = 32;
/** Longer secrets are refused before hashing: no key Tollgate made is that long. */
const MAX_SECRET_LENGTH = 128;

const PUBLIC_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";
const SECRET_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const API_KEY_PATTERN = new RegExp(
  `^${API_KEY_PREFIX}([a-z0-9]{${PUBLIC_ID_LENGTH}})-([A-Za-z0-9]{${MIN_SECRET_LENGTH},${MAX_SECRET_LENGTH}})$`,
);
const PUBLIC_ID_PATTERN = new RegExp(`^[a-z0-9]{${PUBLIC_ID_LENGTH}}$`);

/** A key split into its parts. */
export interface ParsedApiKey {
  publicId: string;
  secret: string;
}

/** A freshly made key: `key` is shown once, `secretHash` is what the store keeps. */
export interface GeneratedApiKey {
  /** The whole key, `sk-tg-<publicId>-<secret>`. */
  key: string;
  publicId: string;
  /** Lowercase hex SHA-256 of the secret. */
  secretHash: string;
}

/** Makes a new random key. */
export function generateApiKey(): GeneratedApiKey {
  const publicId = randomString(PUBLIC_ID_ALPHABET, PUBLIC_ID_LENGTH);
  const secret = randomString(SECRET_ALPHABET, SECRET_LENGTH);
  return { key: formatApiKey({ publicId, secret }), publicId, secretHash: hashSecret(secret) };
}

/** Joins the parts of a key. */
export function formatApiKey(parts: ParsedApiKey): string {
  return `${API_KEY_PREFIX}${parts.publicId}-${parts.secret}`;
}

/** Splits a key into its parts, or `undefined` when the text is not shaped like a key. */
export function parseApiKey(text: string): ParsedApiKey | undefined {
  const match = API_KEY_PATTERN.exec(text);
  if (match === null) return undefined;
  const [, publicId, secret] = match;
  if (publicId === undefined || secret === undefined) return undefined;
  return { publicId, secret };
}

/** Whether the text is shaped like a public id (`[a-z0-9]{12}`). */
export function isPublicId(text: string): boolean {
  return PUBLIC_ID_PATTERN.test(text);
}

/** Lowercase hex SHA-256 of a secret, as stored. */
export function hashSecret(secret: string): string {
  // The one-shot `crypto.hash` with hex output is several times cheaper than `createHash`.
  return hash("sha256", secret, "hex");
}

/**
 * Whether `secret` hashes to `secretHash` (lowercase hex SHA-256), compared in constant time.
 * Both sides are 32-byte digests, so not even the length of the stored value leaks.
 */
export function verifySecret(secret: string, secretHash: string | Buffer): boolean {
  const expected = typeof secretHash === "string" ? Buffer.from(secretHash, "hex") : secretHash;
  const actual = Buffer.from(hashSecret(secret), "hex");
  return expected.length === actual.length && timingSafeEqual(expected, actual);
}

/**
 * A uniformly random string over `alphabet`: bytes that would bias the modulo (at or above the
 * largest multiple of the alphabet's length) are thrown away.
 */
function randomString(alphabet: string, length: number): string {
  const limit = 256 - (256 % alphabet.length);
  let result = "";
  while (result.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte >= limit) continue;
      result += alphabet[byte % alphabet.length];
      if (result.length === length) break;
    }
  }
  return result;
}
