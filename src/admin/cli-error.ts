/**
 * A CLI command failed because of what the operator asked (unknown account, duplicate name,
 * bad option). The dispatcher prints the message, without a stack trace, and exits with 1.
 */
export class CliError extends Error {
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "CliError";
  }
}

/** Where a command writes its output: one call per line, without the line break. */
export interface OutputSink {
  write(line: string): void;
  /**
   * Whether the reader has gone (`tollgate usage | head` closed the pipe): what is written now
   * is dropped, so a command that reads page after page from the store may stop. Absent: never.
   */
  readonly closed?: boolean;
}

/**
 * The items of `source` until the reader of `out` has gone: a ledger of a million rows piped
 * to `head` would otherwise be read to its end for nothing (seconds on SQLite, on PostgreSQL a
 * shared database's load).
 */
export async function* whileReaderListens<T>(source: AsyncIterable<T>, out: OutputSink): AsyncGenerator<T> {
  for await (const item of source) {
    yield item;
    if (out.closed === true) return;
  }
}
