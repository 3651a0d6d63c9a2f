import type { CodePointRanges } from "./regex-character-sets.ts";

/**
 * The classes of characters that a list of character sets (an automaton's positions) tells
 * apart: two characters are in one class when every set holds both or neither, and characters no
 * set holds are in none. `classesOf[i]` lists the classes the `i`th set holds (their union is the
 * set); `work` is what telling them apart took, in sets times the pieces of the alphabet they
 * cover.
 *
 * `\S+@\S+` has a thousand positions but two classes, `@` and the other non-spaces: a state of
 * its automaton goes on by two classes of input, where the bounds of its sets' ranges are two
 * dozen.
 */
export function classifyCharacters(sets: readonly CodePointRanges[]): {
  classesOf: readonly (readonly number[])[];
  work: number;
} {
  // Copies of a repetition share their node's ranges: each distinct set is looked at once.
  const distinct = new Map<string, number>();
  const idOfShared = new Map<CodePointRanges, number>();
  const setIds = sets.map((ranges) => {
    let id = idOfShared.get(ranges);
    if (id !== undefined) return id;
    const key = ranges.flat().join(",");
    id = distinct.get(key);
    if (id === undefined) {
      id = distinct.size;
      distinct.set(key, id);
    }
    idOfShared.set(ranges, id);
    return id;
  });
  /** Each distinct set as its ranges' bounds, first and last in turn. */
  const distinctSets = [...distinct.keys()].map((key) => (key === "" ? [] : key.split(",").map(Number)));
  // The pieces of the alphabet between any two bounds: each lies wholly inside or outside of every set.
  const starts = new Set<number>();
  for (const bounds of distinctSets)
    for (let index = 0; index < bounds.length; index += 2) {
      starts.add(bounds[index] as number).add((bounds[index + 1] as number) + 1);
    }
  const pieces = Int32Array.from(starts).sort();
  /** The ids of the distinct sets that hold each piece. */
  const holders: number[][] = Array.from(pieces, () => []);
  let work = 0;
  distinctSets.forEach((bounds, id) => {
    for (let index = 0; index < bounds.length; index += 2) {
      const [first, last] = [bounds[index] as number, bounds[index + 1] as number];
      for (
        let piece = lowerBound(pieces, first);
        piece < pieces.length && (pieces[piece] as number) <= last;
        piece++
      ) {
        const ids = holders[piece] as number[];
        // Ranges of a set that overlap name it once.
        if (ids.at(-1) !== id) ids.push(id);
        work++;
      }
    }
  });
  const classOfHolders = new Map<string, number>();
  const classesOfDistinct: number[][] = distinctSets.map(() => []);
  for (const ids of holders) {
    if (ids.length === 0) continue;
    const key = ids.join(",");
    if (classOfHolders.has(key)) continue;
    const id = classOfHolders.size;
    classOfHolders.set(key, id);
    for (const holder of ids) classesOfDistinct[holder]?.push(id);
    work += ids.length;
  }
  return { classesOf: setIds.map((id) => classesOfDistinct[id] ?? []), work: work + sets.length };
}

/** The index of the first of the sorted `values` at or above `value`. */
function lowerBound(values: Int32Array, value: number): number {
  let [low, high] = [0, values.length];
  while (low < high) {
    const middle = (low + high) >>> 1;
    if ((values[middle] as number) < value) low = middle + 1;
    else high = middle;
  }
  return low;
}
