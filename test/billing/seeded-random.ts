/**
 * A small seeded generator (SplitMix64 on bigints) for property-style tests: the same seed gives
 * the same values on every run, so a failure can be replayed.
 */
const MASK_64 = (1n << 64n) - 1n;

export interface SeededRandom {
  /** A uniform 64-bit value. */
  next64(): bigint;
  /** A bigint from 0 to `limit - 1` (`limit` > 0). */
  below(limit: bigint): bigint;
  /** An integer from `min` to `max`, both included. */
  integer(min: number, max: number): number;
  /** A string of `length` decimal digits. */
  digits(length: number): string;
  /** One of the items. */
  pick<Item>(items: readonly Item[]): Item;
}

export function createSeededRandom(seed: bigint): SeededRandom {
  let state = seed & MASK_64;
  const next64 = (): bigint => {
    state = (state + 0x9e3779b97f4a7c15n) & MASK_64;
    let mixed = state;
    mixed = ((mixed ^ (mixed >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK_64;
    mixed = ((mixed ^ (mixed >> 27n)) * 0x94d049bb133111ebn) & MASK_64;
    return mixed ^ (mixed >> 31n);
  };
  const below = (limit: bigint): bigint => {
    // Enough random bits that the modulo bias is negligible for test purposes.
    let value = 0n;
    for (let bits = 0n; 1n << bits <= limit << 64n; bits += 64n) value = (value << 64n) | next64();
    return value % limit;
  };
  const integer = (min: number, max: number): number => min + Number(below(BigInt(max - min + 1)));
  return {
    next64,
    below,
    integer,
    digits: (length) => Array.from({ length }, () => String(integer(0, 9))).join(""),
    pick: (items) => {
      const item = items[integer(0, items.length - 1)];
      if (item === undefined) throw new Error("pick from an empty list");
      return item;
    },
  };
}
