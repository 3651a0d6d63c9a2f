/** C0 controls but tab, line feed and carriage return; DEL; C1 controls. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const CONTROL_CHARACTERS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;

/**
 * `text` with its control characters (other than tab and line breaks) written as `\u001b` and the
 * like, as JSON writes them: what a report prints comes partly from API clients (a request's
 * `user`), and an escape sequence printed raw would clear an operator's terminal, retitle its
 * window or recolour what follows.
 */
export function showControlCharacters(text: string): string {
  return text.replace(
    CONTROL_CHARACTERS,
    (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, "0")}`,
  );
}
