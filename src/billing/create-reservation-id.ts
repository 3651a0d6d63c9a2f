/**
 * Ids of reservations (and of their usage rows), one made for every chat request that is
 * billed: kept apart from reserve-and-settle.ts, whose flow they are no part of, together with
 * the pool of random bytes they draw from.
 */
import { randomFillSync } from "node:crypto";

/** Random bytes drawn ahead: one `randomBytes` call costs several microseconds, a slice of this far less. */
const randomPool = Buffer.allocUnsafe(10 * 256);
let randomPoolOffset = randomPool.length;
/** Each byte value as two lower-case hex digits. */
const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

/**
 * A new reservation id (also its usage row's id): a time-ordered UUID (version 7, RFC 9562),
 * the millisecond `now` then 74 random bits. Ids made one after the other sort close together,
 * so the primary-key indexes of `reservations` and `usage` grow at their end: a batch of
 * settles touches a page or two of each instead of one random page per row, which keeps the
 * write-ahead log (and its checkpoints) small. Written digit by digit from a table: a Buffer
 * per id and its hex conversion cost several times more, on every request.
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
  const high = Math.floor(milliseconds / 2 ** 16);
  const low = milliseconds % 2 ** 16;
  const byte = (offset: number) => HEX[random[at + offset] as number] as string;
  return (
    `${(high >>> 0).toString(16).padStart(8, "0")}-${HEX[low >>> 8]}${HEX[low & 0xff]}-` +
    `${HEX[0x70 | ((random[at] as number) & 0x0f)]}${byte(1)}-` +
    `${HEX[0x80 | ((random[at + 2] as number) & 0x3f)]}${byte(3)}-` +
    `${byte(4)}${byte(5)}${byte(6)}${byte(7)}${byte(8)}${byte(9)}`
  );
}
