/** Why an admin operation was refused. */
export type AdminErrorKind =
  /** A value is not acceptable (bad name, amount, limit, date). */
  | "invalid_value"
  /** The account or key named does not exist. */
  | "not_found"
  /** The name is already taken. */
  | "conflict";

/**
 * An admin operation (shared by the CLI and the admin HTTP API) refused because of its input.
 * The message is shown to the operator as it is: it says what was wrong and how to fix it.
 * The CLI turns it into a `CliError`; the admin API maps it to an HTTP error.
 */
export class AdminError extends Error {
  readonly kind: AdminErrorKind;
  /** The offending field (`name`, `balance`, `rpm`...), when there is one. */
  readonly field: string | undefined;

  constructor(kind: AdminErrorKind, message: string, options: { field?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.name = "AdminError";
    this.kind = kind;
    this.field = options.field;
  }
}
