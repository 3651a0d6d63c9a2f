/**
 * What a CLI command says when its store fails under it: PostgreSQL's own words ("canceling
 * statement due to statement timeout", "Connection terminated unexpectedly") tell neither what
 * was blocked, nor whether the change was made, nor that the output printed so far is cut short.
 * SQLite's errors are explained where they arise (store/sqlite/explain-sqlite-error.ts); this
 * adds, for every store, whether the change was made and that the output above is incomplete.
 */
import { isPostgresConnectionLost } from "../store/is-store-unavailable.ts";
import { parsePostgresUrl } from "../store/postgres/parse-postgres-url.ts";
import { SqliteFileError } from "../store/sqlite/explain-sqlite-error.ts";
import { CliError } from "./cli-error.ts";

/** What the failed command was doing, for the message. */
export interface StoreFailureContext {
  /** The database URL the command used (shown without its password). */
  database: string;
  /** The command as the operator knows it: `accounts credit`. */
  command: string;
  /**
   * `reads`: it changes nothing. `writes`: it makes one change, in one transaction. `repairs`:
   * `audit --repair-spent`, one repair per account.
   */
  effect: "reads" | "writes" | "repairs";
  /** A command that shows whether the change was made (`tollgate accounts show alice`). */
  check: string | undefined;
  /** Lines the command had written to stdout before it failed. */
  linesWritten: number;
  /** How long the command had run, in milliseconds. */
  elapsedMs: number;
}

/** A PostgreSQL error as `pg` reports what the server answered: a SQLSTATE and a severity. */
interface PostgresServerError extends Error {
  code: string;
  severity: string;
}

/**
 * The error to report for `error`, which a store operation of the command threw: a
 * {@link CliError} that says what failed, whether anything was changed, that the output is
 * incomplete and what to do; `error` itself where there is nothing to add (an operator's mistake
 * already told, a failure before the command wrote or changed anything on a store other than
 * PostgreSQL). Messages never show the database URL's password.
 */
export function explainStoreFailure(error: unknown, context: StoreFailureContext): unknown {
  if (error instanceof CliError) return error;
  const incomplete =
    context.linesWritten > 0
      ? ` The output is incomplete: it stops after its first ${context.linesWritten.toLocaleString("en-US")} ${context.linesWritten === 1 ? "line" : "lines"}.`
      : "";
  const postgres = /^postgres(?:ql)?:\/\//.test(context.database);
  const explained = postgres ? explainPostgres(error, context) : undefined;
  const sqlite = postgres ? undefined : findError(error, (each) => each instanceof SqliteFileError);
  if (sqlite !== undefined) {
    // SQLite's own words, with the file and the fix (explain-sqlite-error.ts), and what became of
    // the change: a failed transaction on a local file is rolled back whole, whatever failed.
    const message = sqlite.message.replace(/(?<![.!?])$/, ".");
    return new CliError(`${message} ${outcome(context, true)}${incomplete}`, { cause: error });
  }
  if (explained === undefined) {
    // SQLite's errors, explained where they arise, or an error of another kind: only the cut.
    if (incomplete === "") return error;
    const message = error instanceof Error ? error.message : String(error);
    return new CliError(`${message}${/[.!?]$/.test(message) ? "" : "."}${incomplete}`, { cause: error });
  }
  const { what, answered, todo } = explained;
  return new CliError(`${what} ${outcome(context, answered)}${incomplete} ${todo}`, { cause: error });
}

/**
 * What happened, in words, whether PostgreSQL answered (so the statement's transaction was rolled
 * back) or the connection broke (so a commit under way may have been made), and what to do.
 */
function explainPostgres(
  error: unknown,
  context: StoreFailureContext,
): { what: string; answered: boolean; todo: string } | undefined {
  const command = `\`${context.command}\``;
  const after = `after ${(context.elapsedMs / 1000).toFixed(1)} s`;
  const where = `PostgreSQL at ${redact(context.database)}`;
  const server = findServerError(error);
  if (server?.code === "57014" || server?.code === "55P03") {
    const locked =
      "waited for a row that another session holds locked (an open transaction, such as a psql session after SELECT ... FOR UPDATE)";
    const why =
      server.code === "55P03"
        ? `its statement ${locked}`
        : /statement timeout/.test(server.message)
          ? `its statement ${locked}, or ran that long on an overloaded database`
          : "an administrator or another session cancelled its statement (pg_cancel_backend)";
    return {
      what: `${where} cancelled ${command} ${after} (${server.message}): ${why}.`,
      answered: true,
      todo:
        server.code === "55P03" || /timeout/.test(server.message)
          ? "Retry once the other transaction has ended (pg_stat_activity shows the sessions 'idle in transaction' that hold locks)."
          : "Run it again.",
    };
  }
  if (server !== undefined && !isPostgresConnectionLost(server)) {
    return {
      what: `${where} refused ${command}: ${server.message} (SQLSTATE ${server.code}).`,
      answered: true,
      todo: "Fix what PostgreSQL names, then run it again.",
    };
  }
  const lost = findError(error, isPostgresConnectionLost);
  if (lost === undefined) return undefined;
  const silent = /^Query read timeout/.test(lost.message);
  return {
    what: silent
      ? `${where} stopped answering while ${command} ran (${after}, ${lost.message}): the server or the network to it hangs.`
      : `The connection to ${where} broke while ${command} ran, ${after} (${describe(lost)}): the server restarted, failed over or refused the connection, an administrator ended the session, or the network or a proxy cut it.`,
    answered: false,
    todo: "Run it again once PostgreSQL answers.",
  };
}

/** Whether anything was changed, as far as the command can tell. */
function outcome(context: StoreFailureContext, answered: boolean): string {
  if (context.effect === "reads") return "Nothing was changed: the command only reads.";
  if (context.effect === "repairs") {
    return `Repairs made before the failure stand, the rest were not made: see what is left with ${context.check ?? "`tollgate audit`"}.`;
  }
  if (answered) return "Its transaction was rolled back: nothing was changed.";
  const check = context.check === undefined ? "" : ` with ${context.check}`;
  return `Whether the change was made is unknown: PostgreSQL may have committed it before the connection broke. Check${check} before you run the command again, or it may be done twice.`;
}

/** The URL without its password and parameters (`parsePostgresUrl`); never the URL itself. */
function redact(database: string): string {
  try {
    return parsePostgresUrl(database).redacted;
  } catch {
    return "(the configured database)";
  }
}

/** An error PostgreSQL answered, found in `error`, its causes or an `AggregateError`'s members. */
function findServerError(error: unknown): PostgresServerError | undefined {
  return findError(error, (each): each is PostgresServerError => {
    const fields = each as { code?: unknown; severity?: unknown };
    return (
      typeof fields.code === "string" &&
      /^[0-9A-Z]{5}$/.test(fields.code) &&
      typeof fields.severity === "string"
    );
  }) as PostgresServerError | undefined;
}

/** The first error in `error`, its `cause` chain and `AggregateError` members that `test` accepts. */
function findError(error: unknown, test: (error: Error) => boolean, depth = 0): Error | undefined {
  if (!(error instanceof Error) || depth > 8) return undefined;
  if (test(error)) return error;
  if (error instanceof AggregateError) {
    for (const member of error.errors) {
      const found = findError(member, test, depth + 1);
      if (found !== undefined) return found;
    }
  }
  return findError(error.cause, test, depth + 1);
}

/** `pg`'s message, or the socket code where it has none (an `AggregateError` of refusals). */
function describe(error: Error): string {
  if (error.message !== "") return error.message;
  const code = (error as { code?: unknown }).code;
  return typeof code === "string" ? code : error.name;
}
