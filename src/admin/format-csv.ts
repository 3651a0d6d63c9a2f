/**
 * Lays rows out as CSV (RFC 4180): a header line, then one line per row; a cell holding a comma,
 * a double quote or a line break is quoted, with its double quotes doubled. `null` is an empty
 * cell. Returns the lines without their line breaks (join them with CRLF for a file or HTTP).
 */
export function formatCsv(
  headers: readonly string[],
  rows: readonly (readonly (string | number | boolean | null)[])[],
): string[] {
  return [headers.map(formatCell).join(","), ...rows.map((row) => row.map(formatCell).join(","))];
}

function formatCell(value: string | number | boolean | null): string {
  if (value === null) return "";
  const text = String(value);
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
