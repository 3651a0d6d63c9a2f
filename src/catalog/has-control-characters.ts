const CONTROL_CHARACTERS = /[\p{Cc}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;

/**
 * Whether `text` holds a control character (C0 and C1 controls: line breaks, tabs, escapes, DEL)
 * or a text-direction mark (U+202E and the like): the rule for names that are printed in tables
 * and logs (key names, model ids). A line break or tab breaks a table, an escape sequence reaches
 * the operator's terminal, a text-direction mark shows the rest of its row reversed. Other format
 * characters pass: the zero-width joiner holds emoji sequences together.
 */
export function hasControlCharacters(text: string): boolean {
  return CONTROL_CHARACTERS.test(text);
}
