/**
 * "Did you mean" for configuration keys and model ids: the closest known name when it is close
 * enough to be a typo (same letters ignoring case, `_` and `-`, or about one edit per three
 * letters).
 */
export function suggestName(input: string, known: readonly string[]): string | undefined {
  return createNameSuggester(known)(input);
}

/**
 * {@link suggestName} for many inputs against the same names: the names are prepared once. A
 * catalogue's check of its fallbacks asks once per fallback; with 3000 models and a typo in
 * every fallback, preparing the 3000 ids anew each time (and measuring every one in full) held
 * the event loop for seconds.
 */
export function createNameSuggester(known: readonly string[]): (input: string) => string | undefined {
  // The first name of each normalized form, as the first match in order is the one suggested.
  const byNormalized = new Map<string, string>();
  for (const name of known) {
    const normalized = normalize(name);
    if (!byNormalized.has(normalized)) byNormalized.set(normalized, name);
  }
  const lowered = known.map((name) => name.toLowerCase());
  const rows = new EditDistanceRows();
  return (input) => {
    const same = byNormalized.get(normalize(input));
    if (same !== undefined) return same;
    const lowerInput = input.toLowerCase();
    let best: { name: string; distance: number } | undefined;
    for (let index = 0; index < known.length; index++) {
      const name = known[index]!;
      // One edit per three letters: "prot" → "port", "paralel" → "parallel", but "x" is not "a".
      const allowed = Math.floor(Math.min(input.length, name.length) / 3);
      // At least as many edits as the lengths differ: a name too far off in length cannot be
      // suggested, and is not measured (the table is one length times the other: a field name of
      // 8 MB took 12 s and 1.7 GB).
      if (Math.abs(input.length - name.length) > allowed) continue;
      // Measured only as far as it could still be suggested and beat the best so far.
      const bound = best === undefined ? allowed : Math.min(allowed, best.distance - 1);
      // 0 edits is the same name, which the normalized forms found already.
      if (bound <= 0) continue;
      const distance = rows.measure(lowerInput, lowered[index]!, bound);
      if (distance <= bound) best = { name, distance };
    }
    return best?.name;
  };
}

function normalize(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, "");
}

/**
 * Per UTF-16 code unit, a count, for {@link EditDistanceRows}' lower bound: all 0 between
 * measurements, made once for all of them (256 KB).
 */
let counts: Int32Array | undefined;

/** The three rows of the edit-distance table that a measurement needs, reused between names. */
class EditDistanceRows {
  #rows: [Int32Array, Int32Array, Int32Array] = [new Int32Array(0), new Int32Array(0), new Int32Array(0)];

  /**
   * A lower bound of the distance, found in one pass: every edit but a transposition removes at
   * most one of the letters that one name has more of than the other, a transposition none.
   * Ids of one catalogue that differ in their digits ("model-number-0029", "-1234") are told
   * apart without the table.
   */
  #countDifference(left: string, right: string): number {
    counts ??= new Int32Array(65_536);
    const table = counts;
    for (let index = 0; index < left.length; index++) table[left.charCodeAt(index)]!++;
    let onlyRight = 0;
    for (let index = 0; index < right.length; index++) {
      if (--table[right.charCodeAt(index)]! < 0) onlyRight++;
    }
    const onlyLeft = left.length - (right.length - onlyRight);
    for (let index = 0; index < left.length; index++) table[left.charCodeAt(index)] = 0;
    for (let index = 0; index < right.length; index++) table[right.charCodeAt(index)] = 0;
    return Math.max(onlyLeft, onlyRight);
  }

  /**
   * Levenshtein distance with adjacent transpositions counted as one edit, when it is at most
   * `bound`; anything above `bound` otherwise (the measurement stops at the first row of the
   * table whose every entry is above it: no later row has a smaller one).
   */
  measure(wholeLeft: string, wholeRight: string, bound: number): number {
    // What both begin and end with takes no edit: ids of one catalogue share most of their letters
    // ("model-number-0005"), and only the rest is measured.
    let start = 0;
    const shorter = Math.min(wholeLeft.length, wholeRight.length);
    while (start < shorter && wholeLeft.charCodeAt(start) === wholeRight.charCodeAt(start)) start++;
    let end = 0;
    while (
      end < shorter - start &&
      wholeLeft.charCodeAt(wholeLeft.length - 1 - end) === wholeRight.charCodeAt(wholeRight.length - 1 - end)
    ) {
      end++;
    }
    const left = wholeLeft.slice(start, wholeLeft.length - end);
    const right = wholeRight.slice(start, wholeRight.length - end);
    if (this.#countDifference(left, right) > bound) return bound + 1;
    const columns = right.length + 1;
    if (this.#rows[0].length < columns) {
      this.#rows = [new Int32Array(columns), new Int32Array(columns), new Int32Array(columns)];
    }
    let [beforePrevious, previous, current] = this.#rows;
    for (let column = 0; column < columns; column++) previous[column] = column;
    for (let row = 1; row <= left.length; row++) {
      current[0] = row;
      let smallest = row;
      const leftCode = left.charCodeAt(row - 1);
      for (let column = 1; column < columns; column++) {
        const rightCode = right.charCodeAt(column - 1);
        let distance = Math.min(
          previous[column]! + 1,
          current[column - 1]! + 1,
          previous[column - 1]! + (leftCode === rightCode ? 0 : 1),
        );
        if (
          row > 1 &&
          column > 1 &&
          leftCode === right.charCodeAt(column - 2) &&
          left.charCodeAt(row - 2) === rightCode
        ) {
          distance = Math.min(distance, beforePrevious[column - 2]! + 1);
        }
        current[column] = distance;
        if (distance < smallest) smallest = distance;
      }
      if (smallest > bound) return bound + 1;
      [beforePrevious, previous, current] = [previous, current, beforePrevious];
    }
    return previous[columns - 1]!;
  }
}
