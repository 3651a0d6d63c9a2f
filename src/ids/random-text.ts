import { randomFillSync } from "node:crypto";

/** Random bytes drawn ahead: one `randomBytes` call costs several microseconds, a slice of this far less. */
const pool = Buffer.allocUnsafe(4096);
let offset = pool.length;

/** `length` fresh random bytes (at most 256), written as hex or base64url. */
export function createRandomText(length: number, encoding: "hex" | "base64url"): string {
  if (offset + length > pool.length) {
    randomFillSync(pool);
    offset = 0;
  }
  const start = offset;
  offset += length;
  return pool.toString(encoding, start, start + length);
}
