/**
 * The number of characters in `text` as a person counts them: Unicode code points, so an emoji
 * or another character outside the Basic Multilingual Plane is one, where `length` counts its
 * two UTF-16 units.
 */
export function countCharacters(text: string): number {
  let count = 0;
  for (const _character of text) count += 1;
  return count;
}

/** Whether `text` has more than `maximum` characters (code points, as {@link countCharacters}). */
export function hasMoreCharactersThan(text: string, maximum: number): boolean {
  // A code point takes one or two UTF-16 units: most texts are settled without counting.
  if (text.length <= maximum) return false;
  if (text.length > 2 * maximum) return true;
  return countCharacters(text) > maximum;
}
