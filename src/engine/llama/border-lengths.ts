/**
 * For each prefix of `stop`, the length of its longest proper prefix that is also its suffix (the
 * Knuth–Morris–Pratt prefix function), `stop.length` steps in all. Stop-string searches make it
 * once per stop string, so that no search goes back over text it has read.
 */
export function borderLengths(stop: string): Int32Array {
  const borders = new Int32Array(stop.length);
  let length = 0;
  for (let index = 1; index < stop.length; index += 1) {
    const code = stop.charCodeAt(index);
    while (length > 0 && stop.charCodeAt(length) !== code) length = borders[length - 1] ?? 0;
    if (stop.charCodeAt(length) === code) length += 1;
    borders[index] = length;
  }
  return borders;
}
