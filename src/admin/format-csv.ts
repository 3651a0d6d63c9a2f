import { showControlCharacters } from "./show-control-characters.ts";

/** One CSV cell's value: `null` is an empty cell. */
export type CsvValue = string | number | boolean | null;

/**
 * One CSV line (RFC 4180), without its line break (end lines with CRLF for a file or HTTP): a
 * cell holding a comma, a double quote or a line break is quoted, with its double quotes doubled;
 * so is one holding a semicolon or a tab, which a spreadsheet set to split on them (Excel in
 * locales whose decimal sign is a comma, LibreOffice's import) reads as a separator: `x;=1+1`
 * unquoted is a cell `=1+1` there, a formula past the guard below.
 *
 * Text that a spreadsheet would run as a formula (starting with `=`, `+`, `-`, `@`, a tab or a
 * line break, or one of those signs after white space or in its fullwidth form) gets a `'` in
 * front, as OWASP advises: request ids and `user` values come from
 * API clients, and a usage export is opened by whoever pays the bills. Numbers stay as they are.
 * Control characters other than tab and line breaks are written as `\u001b` and the like (see
 * show-control-characters.ts): the CLI prints CSV to a terminal.
 */
export function formatCsvLine(cells: readonly CsvValue[]): string {
  return cells.map(formatCell).join(",");
}

/**
 * What spreadsheets read as the start of a formula: also after white space (LibreOffice trims
 * it), and in the fullwidth forms (＝＋－＠) that East Asian input methods type.
 */
const FORMULA_START = /^(?:[\t\r\n]|\s*[=+\-@\uff1d\uff0b\uff0d\uff20])/;

function formatCell(value: CsvValue): string {
  if (value === null) return "";
  let text = showControlCharacters(String(value));
  if (typeof value === "string" && FORMULA_START.test(text)) text = `'${text}`;
  return /[",;\t\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
