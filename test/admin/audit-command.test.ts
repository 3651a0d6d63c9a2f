import { appendFileSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { runAuditCommand } from "../../src/admin/audit-command.ts";
import { CliError } from "../../src/admin/cli-error.ts";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { openStore } from "../../src/store/open-store.ts";
import { openNodeSqliteDatabase } from "../../src/store/sqlite/node-sqlite-database.ts";
import type { Store, UsageRecord } from "../../src/store/store.ts";
import { makeAccount, makeReservation, makeSettlement } from "../store/store-fixtures.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { runCli } from "../support/run-cli.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
let url: string;
let store: Store;

beforeEach(async () => {
  url = newDatabaseUrl(directory);
  store = await openStore(url);
});

afterEach(async () => {
  await store.close();
});

async function audit(...argv: string[]) {
  const out = collectOutput();
  const outcome = await runAuditCommand(store, argv, out);
  return { ...outcome, lines: out.lines };
}

function runSql(statement: string): void {
  const database = openNodeSqliteDatabase(url.slice("sqlite:".length));
  try {
    database.prepare(statement).run([]);
  } finally {
    database.close();
  }
}

describe("audit", () => {
  it("passes on a consistent ledger", async () => {
    const acme = makeAccount({ name: "acme", balanceNano: 10n });
    await store.insertAccount(acme);
    await store.insertAccount(makeAccount({ name: "beta" }));
    const reservation = makeReservation({ accountId: acme.id, amountNano: 5n });
    await store.reserve(reservation);
    await store.settle(makeSettlement(reservation, 3n));
    expect(await audit()).toEqual({
      ok: true,
      problems: [],
      lines: ["audit passed: 2 accounts, no open reservations"],
    });
  });

  // Regression: it passed without a word while a journal held charges not in the balances.
  it("says when the charge journal holds charges the store has not taken, or lines it cannot read", async () => {
    const journal = join(directory, `owed-${Date.now()}.jsonl`);
    const told = async () => {
      const out = collectOutput();
      expect((await runAuditCommand(store, [], out, journal)).ok).toBe(true);
      return out.lines.slice(1);
    };
    expect(await told()).toEqual([]);
    const owing = new ChargeJournal(journal);
    const usage = (id: string): UsageRecord => ({
      id,
      requestId: `request-${id}`,
      accountId: "account-1",
      keyPublicId: "key-1",
      model: "m",
      promptTokens: 1,
      completionTokens: 2,
      costNano: 3n,
      finishReason: "stop",
      errorCode: undefined,
      user: undefined,
      queueMs: undefined,
      firstTokenMs: undefined,
      totalMs: 4,
      estimated: false,
      createdAt: new Date("2026-11-29T00:00:00Z"),
    });
    owing.owe(usage("a"));
    owing.owe(usage("b"));
    owing.paid("a");
    appendFileSync(journal, "garbage\n");
    expect(await told()).toEqual([
      `${journal} holds 1 charge the store has not taken yet (it was locked, full or read-only): not in these balances. The server records them once it can write (or at its next start).`,
      `${journal} has 1 line that cannot be read: the next start keeps them aside in ${journal}.unreadable.`,
    ]);
    // Paid, and garbage only: nothing owed.
    owing.paid("b");
    writeFileSync(journal, "garbage\n");
    writeFileSync(`${journal}.unreadable`, "garbage\n");
    expect(await told()).toEqual([
      `${journal} has 1 line that cannot be read: the next start keeps them aside in ${journal}.unreadable.`,
      `${journal}.unreadable holds lines of the charge journal a start could not read: record by hand any charge they hold.`,
    ]);

    // And from the command line, for the journal beside the configured database.
    const folder = join(directory, `cli-${Date.now()}`);
    mkdirSync(folder);
    writeFileSync(join(folder, "tollgate.yaml"), "database: sqlite:./t.db\n");
    const unset = ["TOLLGATE_CONFIG", "TOLLGATE_DATABASE_URL"];
    expect(runCli(["audit"], { cwd: folder, unset }).stdout).not.toContain("holds");
    new ChargeJournal(join(folder, "t.db.pending-charges.jsonl")).owe(usage("c"));
    const fromCli = runCli(["audit"], { cwd: folder, unset });
    expect(fromCli.code).toBe(0);
    expect(fromCli.stdout).toContain(`${join(folder, "t.db.pending-charges.jsonl")} holds 1 charge`);
  });

  it("passes on an empty store", async () => {
    expect((await audit()).lines).toEqual(["audit passed: 0 accounts, no open reservations"]);
  });

  it("reports an open reservation and fails", async () => {
    await store.insertAccount(makeAccount({ name: "acme" }));
    const rich = makeAccount({ name: "rich", balanceNano: 5_000_000_000n });
    await store.insertAccount(rich);
    await store.reserve(
      makeReservation({
        accountId: rich.id,
        requestId: "req_left",
        amountNano: 2_500_000_000n,
        replicaId: "host:8080",
      }),
    );
    const outcome = await audit();
    expect(outcome.ok).toBe(false);
    expect(outcome.problems).toHaveLength(1);
    expect(outcome.lines[0]).toBe("audit failed: 1 problem in 1 of 2 accounts");
    expect(outcome.lines[1]).toMatch(
      /^ {2}open reservation: [0-9a-f-]{36} \(request req_left\) of account rich \([0-9a-f-]{36}\), key keytest00001, model test-model, amount 2.5, replica host:8080, made 2025-01-01T00:00:00Z, lease until 2025-01-01T00:01:00Z$/,
    );
    expect(outcome.lines.at(-1)).toMatch(/Run the audit while no request is in flight/);
  });

  it("reports balances, spent and reserved amounts that disagree with the ledger", async () => {
    const acme = makeAccount({ name: "acme", balanceNano: 10_000_000_000n });
    await store.insertAccount(acme);
    runSql(
      `update accounts set balance_nano = 10500000000, reserved_nano = 1, spent_nano = 2 where id = '${acme.id}'`,
    );
    const outcome = await audit();
    expect(outcome.ok).toBe(false);
    expect(outcome.lines).toEqual([
      "audit failed: 3 problems in 1 of 1 account",
      `  balance mismatch: account acme (${acme.id}) has balance 10.5, but its credits minus its charges are 10 (difference 0.5)`,
      `  spent mismatch: account acme (${acme.id}) has spent 0.000000002, but its charges sum to 0`,
      `  reserved mismatch: account acme (${acme.id}) has 0.000000001 reserved, but its open reservations sum to 0`,
    ]);
  });

  it("with --repair-spent, sets a spent amount that disagrees to the charges and says so", async () => {
    const acme = makeAccount({ name: "acme", balanceNano: 10_000_000_000n });
    await store.insertAccount(acme);
    runSql(`update accounts set spent_nano = 2 where id = '${acme.id}'`);
    const outcome = await audit("--repair-spent");
    expect(outcome.ok).toBe(true);
    expect(outcome.lines).toEqual([
      `repaired spent: account acme (${acme.id}) from 0.000000002 to 0, the sum of its charges`,
      "audit passed: 1 account, no open reservations",
    ]);
    expect((await store.getAccountMoney(acme.id))?.spentNano).toBe(0n);
  });

  it("refuses arguments", async () => {
    await expect(audit("--fix")).rejects.toThrow(CliError);
    await expect(audit("now")).rejects.toThrow(
      /Unexpected argument 'now'.\nUsage: tollgate audit \[--repair-spent\]/,
    );
  });
});
