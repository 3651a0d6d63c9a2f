/**
 * Whether `text` holds a NUL character (U+0000). PostgreSQL's text cannot hold one (a statement
 * that sends one fails) where SQLite's can, so the admin commands and API settle it before asking
 * a store, the same on both: a name, id or model with one names nothing, and a value to be stored
 * with one is refused.
 */
export function hasNulCharacter(text: string): boolean {
  return text.includes("\u0000");
}
