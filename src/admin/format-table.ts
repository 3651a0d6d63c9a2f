/**
 * Lays rows out as a plain-text table: a header line, then one line per row, columns padded
 * to their widest cell and separated by two spaces, trailing spaces trimmed.
 */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  const widths = headers.map((header, column) =>
    Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)),
  );
  const formatRow = (cells: readonly string[]): string =>
    widths
      .map((width, column) => (cells[column] ?? "").padEnd(width))
      .join("  ")
      .trimEnd();
  return [formatRow(headers), ...rows.map(formatRow)];
}

/** An instant for tables and settings lines: ISO 8601 UTC to the second. */
export function formatInstant(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
