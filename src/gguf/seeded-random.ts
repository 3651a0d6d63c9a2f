/**
 * A small deterministic pseudo-random generator (sfc32) seeded from a number and a label, so
 * every tensor gets its own independent stream and the output does not depend on the order in
 * which tensors are generated. Pure 32-bit integer arithmetic: identical on every platform.
 */
export type SeededRandom = {
  /** Next value, uniform in [0, 1). */
  next(): number;
};

/** Creates a generator whose stream depends only on `seed` and `label`. */
export function createSeededRandom(seed: number, label: string): SeededRandom {
  const [a0, b0, c0, d0] = hashToState(`${seed}\u0000${label}`);
  let a = a0;
  let b = b0;
  let c = c0;
  let d = d0;
  const next = (): number => {
    const t = (((a + b) | 0) + d) | 0;
    d = (d + 1) | 0;
    a = b ^ (b >>> 9);
    b = (c + (c << 3)) | 0;
    c = (c << 21) | (c >>> 11);
    c = (c + t) | 0;
    return (t >>> 0) / 4_294_967_296;
  };
  // Discard the first outputs: sfc32 mixes poorly right after seeding.
  for (let index = 0; index < 15; index++) next();
  return { next };
}

/** cyrb128: four 32-bit hashes of a string, used as the generator state. */
function hashToState(text: string): [number, number, number, number] {
  let h1 = 1_779_033_703;
  let h2 = 3_144_134_277;
  let h3 = 1_013_904_242;
  let h4 = 2_773_480_762;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    h1 = h2 ^ Math.imul(h1 ^ code, 597_399_067);
    h2 = h3 ^ Math.imul(h2 ^ code, 2_869_860_233);
    h3 = h4 ^ Math.imul(h3 ^ code, 951_274_213);
    h4 = h1 ^ Math.imul(h4 ^ code, 2_716_044_179);
  }
  h1 = Math.imul(h3 ^ (h1 >>> 18), 597_399_067);
  h2 = Math.imul(h4 ^ (h2 >>> 22), 2_869_860_233);
  h3 = Math.imul(h1 ^ (h3 >>> 17), 951_274_213);
  h4 = Math.imul(h2 ^ (h4 >>> 19), 2_716_044_179);
  h1 ^= h2 ^ h3 ^ h4;
  h2 ^= h1;
  h3 ^= h1;
  h4 ^= h1;
  return [h1 | 0, h2 | 0, h3 | 0, h4 | 0];
}
