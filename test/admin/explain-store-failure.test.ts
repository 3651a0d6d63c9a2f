/**
 * The words a CLI command's store failure is told in (explain-store-failure.ts), for failures
 * too slow or too rare to cause in a test of the whole command: the store's own statement
 * timeout (30 s), a connection lost while a change was being committed, a server that stopped
 * answering. The whole command is tested in cli-postgres-failures.test.ts.
 */
import { describe, expect, it } from "vitest";
import { CliError } from "../../src/admin/cli-error.ts";
import { describeStoreCommand } from "../../src/admin/describe-store-command.ts";
import { explainStoreFailure, type StoreFailureContext } from "../../src/admin/explain-store-failure.ts";
import { SqliteFileError } from "../../src/store/sqlite/explain-sqlite-error.ts";

const DATABASE = "postgres://tollgate:pa55-s3cret@db.internal:5432/billing?schema=prod&sslmode=require";

/** An error as `pg` reports what the server answered. */
function serverError(code: string, message: string): Error {
  return Object.assign(new Error(message), { code, severity: "ERROR" });
}

function context(overrides: Partial<StoreFailureContext> = {}): StoreFailureContext {
  return {
    database: DATABASE,
    ...describeStoreCommand("accounts", ["credit", "--note", "top up", "weird", "1"], "prod.yaml"),
    linesWritten: 0,
    elapsedMs: 30_012,
    ...overrides,
  };
}

function messageOf(error: unknown): string {
  expect(error).toBeInstanceOf(CliError);
  const message = (error as CliError).message;
  expect(message).not.toContain("pa55-s3cret");
  return message;
}

describe("explainStoreFailure on PostgreSQL", () => {
  it("says a write cancelled by the statement timeout was blocked and changed nothing", () => {
    const error = serverError("57014", "canceling statement due to statement timeout");
    expect(messageOf(explainStoreFailure(error, context()))).toBe(
      "PostgreSQL at postgres://tollgate@db.internal:5432/billing?schema=prod cancelled `accounts credit` after 30.0 s (canceling statement due to statement timeout): its statement waited for a row that another session holds locked (an open transaction, such as a psql session after SELECT ... FOR UPDATE), or ran that long on an overloaded database. Its transaction was rolled back: nothing was changed. Retry once the other transaction has ended (pg_stat_activity shows the sessions 'idle in transaction' that hold locks).",
    );
  });

  it("finds the server's error behind a wrapper", () => {
    const wrapped = new Error("store failed", {
      cause: serverError("57014", "canceling statement due to statement timeout"),
    });
    expect(messageOf(explainStoreFailure(wrapped, context()))).toContain("nothing was changed");
  });

  it("says a write whose connection broke may have been made, and how to check", () => {
    const message = messageOf(
      explainStoreFailure(new Error("Connection terminated unexpectedly"), context({ elapsedMs: 1234 })),
    );
    expect(message).toBe(
      "The connection to PostgreSQL at postgres://tollgate@db.internal:5432/billing?schema=prod broke while `accounts credit` ran, after 1.2 s (Connection terminated unexpectedly): the server restarted, failed over or refused the connection, an administrator ended the session, or the network or a proxy cut it. Whether the change was made is unknown: PostgreSQL may have committed it before the connection broke. Check with `tollgate accounts show 'weird' --config 'prod.yaml'` before you run the command again, or it may be done twice. Run it again once PostgreSQL answers.",
    );
  });

  it("says a server that stopped answering hangs, and that the output is cut short", () => {
    const message = messageOf(
      explainStoreFailure(
        new Error("Query read timeout"),
        context({ ...describeStoreCommand("usage", ["--format", "csv"], undefined), linesWritten: 84_001 }),
      ),
    );
    expect(message).toContain("stopped answering while `usage` ran (after 30.0 s, Query read timeout)");
    expect(message).toContain(
      "Nothing was changed: the command only reads. The output is incomplete: it stops after its first 84,001 lines. Run it again once PostgreSQL answers.",
    );
  });

  it("names a refusal's SQLSTATE, for a server that cannot write (a standby)", () => {
    const error = serverError("25006", "cannot execute UPDATE in a read-only transaction");
    const check = describeStoreCommand("keys", ["revoke", "sk-tg-abc-SECRETSECRET"], undefined);
    expect(check.check).toBe("`tollgate keys list`");
    expect(messageOf(explainStoreFailure(error, context(check)))).toBe(
      "PostgreSQL at postgres://tollgate@db.internal:5432/billing?schema=prod refused `keys revoke`: cannot execute UPDATE in a read-only transaction (SQLSTATE 25006). Its transaction was rolled back: nothing was changed. Fix what PostgreSQL names, then run it again.",
    );
  });

  it("tells a refused connection (every address) as a broken one", () => {
    const refused = new AggregateError([Object.assign(new Error(""), { code: "ECONNREFUSED" })], "");
    const message = messageOf(
      explainStoreFailure(refused, context(describeStoreCommand("audit", ["--repair-spent"], undefined))),
    );
    expect(message).toContain("broke while `audit --repair-spent` ran");
    expect(message).toContain(
      "Repairs made before the failure stand, the rest were not made: see what is left with `tollgate audit`.",
    );
  });
});

describe("explainStoreFailure on SQLite", () => {
  const busy = new SqliteFileError(
    "The database /srv/t.db is locked by another process (waited 5000 ms). Retry once it has finished.",
    5,
    new Error("database is locked"),
  );
  const sqlite = context({ database: "sqlite:/srv/t.db" });

  it("says a write that found the file locked changed nothing (regression: it did not say)", () => {
    expect(messageOf(explainStoreFailure(busy, sqlite))).toBe(
      `${busy.message} Its transaction was rolled back: nothing was changed.`,
    );
  });

  it("finds SQLite's error behind a wrapper, and adds the cut after some output", () => {
    const wrapped = new Error("store failed", { cause: busy });
    expect(messageOf(explainStoreFailure(wrapped, { ...sqlite, effect: "reads", linesWritten: 2 }))).toBe(
      `${busy.message} Nothing was changed: the command only reads. The output is incomplete: it stops after its first 2 lines.`,
    );
  });
});

describe("explainStoreFailure leaves alone", () => {
  it("an operator's mistake, already told", () => {
    const mistake = new CliError('No account has the name or id "x".');
    expect(explainStoreFailure(mistake, context({ linesWritten: 3 }))).toBe(mistake);
  });

  it("an error of another kind before any output, and only adds the cut after some", () => {
    const other = new Error("something else failed");
    const sqlite = context({ database: "sqlite:/srv/t.db" });
    expect(explainStoreFailure(other, sqlite)).toBe(other);
    expect(messageOf(explainStoreFailure(other, { ...sqlite, linesWritten: 1 }))).toBe(
      "something else failed. The output is incomplete: it stops after its first 1 line.",
    );
  });
});
