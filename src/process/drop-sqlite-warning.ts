/**
 * Node 22 prints "ExperimentalWarning: SQLite is an experimental feature..." on stderr when a
 * process first loads `node:sqlite` (Node 24 does not), after the CLI's own output: a script that
 * reads a command's stderr for its errors would find it there. Imported first by the CLI, this
 * drops that one warning, and only it.
 */
const SQLITE_WARNING = "SQLite is an experimental feature";

const emitWarning = process.emitWarning;

function isSqliteWarning(warning: string | Error, typeOrOptions: unknown): boolean {
  const message = typeof warning === "string" ? warning : warning.message;
  const type =
    typeof warning !== "string"
      ? warning.name
      : typeof typeOrOptions === "string"
        ? typeOrOptions
        : (typeOrOptions as { type?: unknown } | undefined)?.type;
  return type === "ExperimentalWarning" && message.startsWith(SQLITE_WARNING);
}

process.emitWarning = function emitWarningButSqlite(
  this: NodeJS.Process,
  warning: string | Error,
  ...rest: unknown[]
): void {
  if (isSqliteWarning(warning, rest[0])) return;
  Reflect.apply(emitWarning, this, [warning, ...rest]);
} as typeof process.emitWarning;
