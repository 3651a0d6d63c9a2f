/**
 * Sets of characters for regular expressions (see parse-regex-pattern.ts): ranges of code points,
 * and the sets ECMA-262's escapes and `.` stand for.
 */

/** Ranges of code points, each `[first, last]`, sorted and apart. */
export type CodePointRanges = readonly (readonly [number, number])[];

/** Code points a string can hold: all but the surrogates, which UTF-8 text never carries. */
export const allCharacters: CodePointRanges = [
  [0, 0xd7ff],
  [0xe000, 0x10ffff],
];

/** Sorts and merges ranges that touch or overlap, and drops surrogates. */
export function normalize(ranges: readonly (readonly [number, number])[]): CodePointRanges {
  const sorted = [...ranges].sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [first, last] of sorted) {
    const previous = merged.at(-1);
    if (previous !== undefined && first <= previous[1] + 1) previous[1] = Math.max(previous[1], last);
    else merged.push([first, last]);
  }
  return intersect(merged, allCharacters);
}

export function complement(ranges: CodePointRanges): CodePointRanges {
  const result: [number, number][] = [];
  let next = 0;
  for (const [first, last] of ranges) {
    if (first > next) result.push([next, first - 1]);
    next = last + 1;
  }
  if (next <= 0x10ffff) result.push([next, 0x10ffff]);
  return intersect(result, allCharacters);
}

export function intersect(a: CodePointRanges, b: CodePointRanges): CodePointRanges {
  const result: [number, number][] = [];
  for (const [firstA, lastA] of a)
    for (const [firstB, lastB] of b) {
      const first = Math.max(firstA, firstB);
      const last = Math.min(lastA, lastB);
      if (first <= last) result.push([first, last]);
    }
  return result;
}

/** One character; none for a lone surrogate (`\uD83D`), which no UTF-8 text holds. */
export function single(character: number): CodePointRanges {
  return normalize([[character, character]]);
}

const digits: CodePointRanges = [[0x30, 0x39]];
const wordCharacters = normalize([
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]);
/** ECMA-262's WhiteSpace and LineTerminator. */
const whiteSpace = normalize([
  [0x09, 0x0d],
  [0x20, 0x20],
  [0xa0, 0xa0],
  [0x1680, 0x1680],
  [0x2000, 0x200a],
  [0x2028, 0x2029],
  [0x202f, 0x202f],
  [0x205f, 0x205f],
  [0x3000, 0x3000],
  [0xfeff, 0xfeff],
]);
export const anyButLineTerminators = complement(
  normalize([
    [0x0a, 0x0a],
    [0x0d, 0x0d],
    [0x2028, 0x2029],
  ]),
);

export const setEscapes: Record<string, CodePointRanges | undefined> = Object.assign(Object.create(null), {
  d: digits,
  D: complement(digits),
  w: wordCharacters,
  W: complement(wordCharacters),
  s: whiteSpace,
  S: complement(whiteSpace),
});

export const controlEscapes: Record<string, number | undefined> = Object.assign(Object.create(null), {
  t: 0x09,
  n: 0x0a,
  v: 0x0b,
  f: 0x0c,
  r: 0x0d,
});
