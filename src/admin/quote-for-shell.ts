/**
 * `text` as one word of a POSIX shell command line, to paste as it is: in single quotes, each
 * single quote in it closed, escaped and opened again (`'` becomes `'\''`).
 */
export function quoteForShell(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}
