/**
 * A CLI command failed because of what the operator asked (unknown account, duplicate name,
 * bad option). The dispatcher prints the message, without a stack trace, and exits with 1, or
 * `exitCode` (a command stopped by a signal: 128 + its number, as a shell reports one).
 */
export class CliError extends Error {
  readonly exitCode: number | undefined;

  constructor(message: string, options: { cause?: unknown; exitCode?: number } = {}) {
    super(message, { cause: options.cause });
    this.name = "CliError";
    this.exitCode = options.exitCode;
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
  /**
   * Resolves once the reader has taken what was written but for a small buffer (a pipe's
   * `drain`), at once where nothing waits. A command that writes page after page waits for it
   * between pages: a reader slower than the store (a pager, a slow ssh copy) would otherwise
   * have the whole ledger pile up in the process's memory. Absent: never waits.
   */
  drained?(): Promise<void>;
}

/**
 * The items of `source` at the pace of the reader of `out`: the next is read once the reader
 * has taken what the last one wrote ({@link OutputSink.drained}), and none once the reader has
 * gone. A ledger of a million rows piped to `head` would otherwise be read to its end for
 * nothing (seconds on SQLite, on PostgreSQL a shared database's load), and piped to a slow
 * reader be held in memory whole.
 */
export async function* pacedByReader<T>(source: AsyncIterable<T>, out: OutputSink): AsyncGenerator<T> {
  for await (const item of source) {
    yield item;
    await out.drained?.();
    if (out.closed === true) return;
  }
}
