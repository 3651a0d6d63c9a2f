import { randomBytes } from "node:crypto";

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/** An id like OpenAI's, `call_` and 24 letters and digits, for upstream calls that came without one. */
export function createToolCallId(): string {
  return `call_${Array.from(randomBytes(24), (byte) => ALPHABET[byte % ALPHABET.length]).join("")}`;
}
