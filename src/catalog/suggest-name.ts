/**
 * "Did you mean" for configuration keys and model ids: the closest known name when it is close
 * enough to be a typo (same letters ignoring case, `_` and `-`, or about one edit per three
 * letters).
 */
export function suggestName(input: string, known: readonly string[]): string | undefined {
  const normalizedInput = normalize(input);
  let best: { name: string; distance: number } | undefined;
  for (const name of known) {
    if (normalize(name) === normalizedInput) return name;
    // At least as many edits as the lengths differ: a name too far off in length cannot be
    // suggested, and is not measured (the table is one length times the other: a field name of
    // 8 MB took 12 s and 1.7 GB).
    if (Math.abs(input.length - name.length) > Math.floor(Math.min(input.length, name.length) / 3)) continue;
    const distance = editDistance(input.toLowerCase(), name.toLowerCase());
    if (best === undefined || distance < best.distance) best = { name, distance };
  }
  if (best === undefined) return undefined;
  // One edit per three letters: "prot" → "port", "paralel" → "parallel", but "x" is not "a".
  const allowed = Math.floor(Math.min(input.length, best.name.length) / 3);
  return best.distance <= allowed ? best.name : undefined;
}

function normalize(name: string): string {
  return name.toLowerCase().replace(/[_-]/g, "");
}

/** Levenshtein distance with adjacent transpositions counted as one edit. */
function editDistance(left: string, right: string): number {
  const rows = left.length + 1;
  const columns = right.length + 1;
  const table: number[] = new Array<number>(rows * columns).fill(0);
  const at = (row: number, column: number): number => table[row * columns + column] ?? 0;
  for (let row = 0; row < rows; row++) table[row * columns] = row;
  for (let column = 0; column < columns; column++) table[column] = column;
  for (let row = 1; row < rows; row++) {
    for (let column = 1; column < columns; column++) {
      const substitution = left[row - 1] === right[column - 1] ? 0 : 1;
      let distance = Math.min(
        at(row - 1, column) + 1,
        at(row, column - 1) + 1,
        at(row - 1, column - 1) + substitution,
      );
      if (
        row > 1 &&
        column > 1 &&
        left[row - 1] === right[column - 2] &&
        left[row - 2] === right[column - 1]
      ) {
        distance = Math.min(distance, at(row - 2, column - 2) + 1);
      }
      table[row * columns + column] = distance;
    }
  }
  return at(rows - 1, columns - 1);
}
