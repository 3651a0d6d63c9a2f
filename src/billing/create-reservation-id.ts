/**
 * Ids of reservations (and of their usage rows), one made for every chat request that is
 * billed: kept apart from reserve-and-settle.ts, whose flow they are no part of, together with
 * the pool of random bytes they draw from.
 */
import { randomFillSync } from "node:crypto";

/** Random bytes drawn ahead: one `randomBytes` call costs several microseconds, a slice of this far less. */
const randomPool = Buffer.allocUnsafe(10 * 256);
let randomPoolOffset = randomPool.length;
/** Lower-case hex digits as character codes. */
const DIGITS = Buffer.from("0123456789abcdef", "latin1");
/** The id's characters, written in place and read as one flat string: no string per piece. */
const idBytes = Buffer.alloc(36, "-".charCodeAt(0));

/** Writes `value` (below 256) as two hex digits at `at`. */
function putByte(at: number, value: number): void {
  idBytes[at] = DIGITS[value >>> 4] as number;
  idBytes[at + 1] = DIGITS[value & 0x0f] as number;
}

/**
 * A new reservation id (also its usage row's id): a time-ordered UUID (version 7, RFC 9562),
 * the millisecond `now` then 74 random bits. Ids made one after the other sort close together,
 * so the primary-key indexes of `reservations` and `usage` grow at their end: a batch of
 * settles touches a page or two of each instead of one random page per row, which keeps the
 * write-ahead log (and its checkpoints) small. Written byte by byte into one buffer and read as
 * one string: a string per piece joined cost ten allocations per id, on every request.
 */
export function createReservationId(now: number): string {
  if (randomPoolOffset + 10 > randomPool.length) {
    randomFillSync(randomPool);
    randomPoolOffset = 0;
  }
  const random = randomPool;
  const at = randomPoolOffset;
  randomPoolOffset += 10;
  // 48 bits of milliseconds: 12 hex digits, as two numbers that fit in 32 bits.
  const milliseconds = Math.max(0, Math.floor(now)) % 2 ** 48;
  const high = Math.floor(milliseconds / 2 ** 16) >>> 0;
  const low = milliseconds % 2 ** 16;
  putByte(0, high >>> 24);
  putByte(2, (high >>> 16) & 0xff);
  putByte(4, (high >>> 8) & 0xff);
  putByte(6, high & 0xff);
  putByte(9, low >>> 8);
  putByte(11, low & 0xff);
  putByte(14, 0x70 | ((random[at] as number) & 0x0f));
  putByte(16, random[at + 1] as number);
  putByte(19, 0x80 | ((random[at + 2] as number) & 0x3f));
  putByte(21, random[at + 3] as number);
  for (let index = 4; index < 10; index++) putByte(24 + 2 * (index - 4), random[at + index] as number);
  return idBytes.toString("latin1", 0, 36);
}
