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
}
