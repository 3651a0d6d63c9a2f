/**
 * After the documented PostgreSQL restore (pg_restore into a new database, then `database:`
 * pointed at it), the charges a killed replica had journaled for the old database carry the old
 * database's tag in their journal's name: nothing recorded them, nothing said so, and `audit`
 * passed without them. A start now warns of such journals and names the rename that makes them
 * this database's, under a replica id of their own (under the replica's own id, the default
 * host:port that a restarted replica keeps, the running replica deleted the file as soon as it
 * owed nothing itself); after it, a lease sweep records them.
 */
import { existsSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { openChargeJournal } from "../../src/billing/open-charge-journal.ts";
import { claimReplicaId, openStore } from "../../src/store/open-store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeAccount, makeReservation, makeSettlement } from "../store/store-fixtures.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the foreign charge journal tests: ${probe.skipped}.`);

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A logger whose lines the test reads. */
function recordingLogger() {
  const lines: Record<string, unknown>[] = [];
  const logger = pino(
    { level: "info" },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as Record<string, unknown>);
      },
    },
  );
  return { lines, logger };
}

describe.skipIf("skipped" in probe)("a journal of charges owed to another database", () => {
  it("is warned of at start with the rename that makes it this database's, which the running replica's sweep then records", async () => {
    if ("skipped" in probe) return;
    const schema = probe;
    cleanups.push(() => schema.drop());
    const store = await openStore(schema.url);
    cleanups.push(() => store.close());
    const folder = mkdtempSync(join(tmpdir(), "tollgate-foreign-journal-"));
    cleanups.push(() => rmSync(folder, { recursive: true, force: true }));
    // The restored database holds the account and the reservation of the killed replica's request.
    const account = makeAccount({ name: "acme", balanceNano: 10_000n });
    expect(await store.insertAccount(account)).toBe("created");
    const reservation = makeReservation({ accountId: account.id, amountNano: 3_000n, replicaId: "old-1" });
    expect(await store.reserve(reservation)).toBe("reserved");
    const tagProbe = await claimReplicaId(schema.url, { replicaId: "store-tag-probe" });
    await tagProbe?.close();
    const storeTag = tagProbe?.storeTag ?? "";
    // Its journal, named for the database the dump was taken from.
    const oldTag = storeTag === "0123456789ab" ? "ba9876543210" : "0123456789ab";
    const foreign = join(folder, `pending-charges-old-1.${oldTag}.jsonl`);
    new ChargeJournal(foreign).owe(makeSettlement(reservation, 2_500n, { createdAt: new Date() }));
    // The replica restarted with its id (host:port by default) on the restored database.
    const first = recordingLogger();
    const opened = await openChargeJournal({
      databaseUrl: schema.url,
      store,
      logger: first.logger,
      replica: { id: "old-1", storeTag, folder },
    });
    // Not its own journal's name (regression): that file it deletes once it owes nothing itself.
    const renameTo = join(
      folder,
      `pending-charges-${encodeURIComponent(`old-1@${oldTag}`)}.${storeTag}.jsonl`,
    );
    expect(renameTo).not.toBe(opened.path);
    const warning = first.lines.find((line) => String(line.msg).includes("owed to another database"));
    expect(warning).toMatchObject({
      level: 40,
      storeTag,
      journals: [{ journal: foreign, owed: 1, renameTo }],
    });
    expect(String(warning?.msg)).toContain("rename each journal as renameTo says");
    // Nothing recorded meanwhile: the journal may be another live deployment's.
    expect(await store.listUsage()).toEqual([]);
    expect(existsSync(foreign)).toBe(true);

    renameSync(foreign, renameTo);
    // The running replica's next lease sweep records it, as a gone replica's journal.
    await opened.adoptOrphans?.();
    expect(existsSync(renameTo)).toBe(false);
    expect((await store.listUsage()).map((row) => [row.id, row.costNano])).toEqual([
      [reservation.id, 2_500n],
    ]);
    expect(await store.getAccountMoney(account.id)).toMatchObject({ balanceNano: 7_500n, reservedNano: 0n });
  });
});
