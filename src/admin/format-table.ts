import { displayWidth } from "./display-width.ts";
import { showControlCharacters } from "./show-control-characters.ts";

/**
 * Lays rows out as a plain-text table: a header line, then one line per row, columns padded
 * to their widest cell and separated by two spaces, trailing spaces trimmed. Widths are the
 * columns a terminal draws (see {@link displayWidth}): CJK and emoji names stay aligned.
 */
export function formatTable(headers: readonly string[], rows: readonly (readonly string[])[]): string[] {
  return createTableLayout(headers)(rows);
}

/**
 * Lays out a table too long to hold, a page of rows at a time: the header goes out with the first
 * page, padded like {@link formatTable} to the widest cell of that page. A later page's wider
 * cell widens its column from there on (it shifts the rest of its line rather than truncating).
 */
export function createTableLayout(
  headers: readonly string[],
): (rows: readonly (readonly string[])[]) => string[] {
  const widths = headers.map((header) => header.length);
  let headerSent = false;
  const formatRow = (cells: readonly string[]): string =>
    widths
      .map((width, column) => padToWidth(cells[column] ?? "", width))
      .join("  ")
      .trimEnd();
  return (given) => {
    // Cells may hold what API clients sent: no escape sequence reaches the terminal.
    const rows = given.map((row) => row.map(showControlCharacters));
    for (const row of rows) {
      for (const [column, width] of widths.entries()) {
        widths[column] = Math.max(width, displayWidth(row[column] ?? ""));
      }
    }
    const lines = rows.map(formatRow);
    if (headerSent) return lines;
    headerSent = true;
    return [formatRow(headers), ...lines];
  };
}

/** `text` followed by the spaces that make it `width` columns wide on a terminal. */
function padToWidth(text: string, width: number): string {
  return text + " ".repeat(Math.max(0, width - displayWidth(text)));
}

/** An instant for tables and settings lines: ISO 8601 UTC to the second. */
export function formatInstant(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, "Z");
}
