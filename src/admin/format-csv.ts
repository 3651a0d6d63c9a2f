/** One CSV cell's value: `null` is an empty cell. */
export type CsvValue = string | number | boolean | null;

/**
 * One CSV line (RFC 4180), without its line break (end lines with CRLF for a file or HTTP): a
 * cell holding a comma, a double quote or a line break is quoted, with its double quotes doubled.
 */
export function formatCsvLine(cells: readonly CsvValue[]): string {
  return cells.map(formatCell).join(",");
}

function formatCell(value: CsvValue): string {
  if (value === null) return "";
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
