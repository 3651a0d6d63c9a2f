/**
 * A PostgreSQL replica that answered 200 while the database was unreachable retries the charge in
 * the background; killed meanwhile (kill -9, out of memory, a node drained), it lost the charge:
 * the request was never charged and `audit` passed (found by killing replicas during outages).
 * The charge is now kept in `charge_journal_dir` under the replica's id before the answer
 * completes, and the replica's next start records it.
 */
import { once } from "node:events";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { ChargeJournal } from "../../src/billing/charge-journal.ts";
import { resolveReplicaId } from "../../src/cluster/resolve-replica-id.ts";
import { claimReplicaId, openStore } from "../../src/store/open-store.ts";
import { startTcpProxy, type TcpProxy } from "../cluster/tcp-proxy.ts";
import {
  type MockUpstream,
  startMockUpstream,
  textEvents,
  writeEvents,
} from "../engine/openai/mock-upstream.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { makeUsage } from "../store/store-fixtures.ts";
import { findFreePort } from "../support/free-port.ts";
import { killServeProcesses, startServeProcess } from "../support/serve-process.ts";

const postgres: PostgresTestSchema | { skipped: string } = await createPostgresTestSchema();
if ("skipped" in postgres) console.warn(`Skipping the PostgreSQL owed-charge case: ${postgres.skipped}.`);

let folder: string;
let proxy: TcpProxy;
let upstream: MockUpstream;
let configFile: string;
let port: number;

beforeAll(async () => {
  if (!("url" in postgres)) return;
  folder = mkdtempSync(join(tmpdir(), "tollgate-pg-owed-charge-"));
  const direct = new URL(postgres.url);
  proxy = await startTcpProxy({
    targetHost: direct.hostname,
    targetPort: Number(direct.port || 5432),
    mode: "forward",
  });
  const proxied = new URL(postgres.url);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(proxy.port);
  upstream = await startMockUpstream();
  port = await findFreePort();
  configFile = join(folder, "tollgate.yaml");
  writeFileSync(
    configFile,
    [
      `server: { host: 127.0.0.1, port: ${port} }`,
      `database: "${proxied.toString()}"`,
      "charge_journal_dir: ./owed",
      "models:",
      "  - id: upstream-chat",
      "    kind: chat",
      '    pricing: { input_per_million: "1", output_per_million: "2" }',
      `    engine: { type: openai, endpoints: [ { base_url: "${upstream.baseUrl}" } ], model: m }`,
      "",
    ].join("\n"),
  );
});

afterAll(async () => {
  killServeProcesses();
  await upstream?.close();
  await proxy?.close();
  if ("url" in postgres) await postgres.drop();
  if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
});

describe.skipIf(!("url" in postgres))(
  "a PostgreSQL replica killed while it owes a charge the database did not take",
  () => {
    it("keeps the charge in charge_journal_dir under its replica id, and its next start records it", async () => {
      if (!("url" in postgres)) return;
      const first = await startServeProcess(configFile, { cwd: folder });
      const store = await openStore(postgres.url);
      try {
        const account = await createAccount(store, { name: "team", balanceNano: 1_000_000_000n });
        const { key } = await createKey(store, { role: "user", accountId: account.id });
        // The upstream answers once the database is gone: the charge cannot be written.
        let answer: () => void = () => {};
        const answered = new Promise<void>((resolve) => {
          answer = resolve;
        });
        upstream.handle(async (_request, response) => {
          await answered;
          await writeEvents(response, textEvents(["Hello", " there"], { usage: [10, 4] }));
        });
        const reply = fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
          method: "POST",
          headers: {
            authorization: `Bearer ${key}`,
            "content-type": "application/json",
            "x-request-id": "owed-then-killed",
          },
          body: JSON.stringify({ model: "upstream-chat", messages: [{ role: "user", content: "Hi" }] }),
        });
        while (upstream.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));
        proxy.setMode("cut");
        answer();
        const response = await reply;
        expect(response.status).toBe(200);
        expect(((await response.json()) as { usage: { total_tokens: number } }).usage.total_tokens).toBe(14);
        const journals = readdirSync(join(folder, "owed"));
        expect(journals).toEqual([
          `pending-charges-${encodeURIComponent(resolveReplicaId("127.0.0.1", port))}.${await storeTag()}.jsonl`,
        ]);

        const exited = once(first.child, "exit");
        first.child.kill("SIGKILL");
        await exited;
        expect(await store.listUsage()).toEqual([]);

        proxy.setMode("forward");
        const second = await startServeProcess(configFile, { cwd: folder });
        try {
          expect(second.output()).toContain('"msg":"recorded the charges the previous run owed"');
          const rows = (await store.listUsage()).filter((row) => row.requestId === "owed-then-killed");
          expect(rows).toHaveLength(1);
          // 10 prompt tokens at 1 and 4 completion tokens at 2 per million.
          expect(rows[0]?.costNano).toBe(18_000n);
          expect(existsSync(join(folder, "owed", journals[0] ?? ""))).toBe(false);
          expect(await store.audit()).toEqual([]);
        } finally {
          const stopped = once(second.child, "exit");
          second.child.kill("SIGTERM");
          await stopped;
        }
      } finally {
        await store.close();
      }
    });
  },
);

describe.skipIf(!("url" in postgres))("the journals other replicas left in charge_journal_dir", () => {
  it("are recorded at start when their replica is gone, and left alone while it runs or may be on its way back", async () => {
    if (!("url" in postgres)) return;
    const store = await openStore(postgres.url);
    const owedFolder = join(folder, "owed");
    mkdirSync(owedFolder, { recursive: true });
    const account = await createAccount(store, { name: "others", balanceNano: 1_000_000_000n });
    const { record: key } = await createKey(store, { role: "user", accountId: account.id });
    const tag = await storeTag();
    const journalOf = (replicaId: string, requestId: string, minutesOld: number, name?: string) => {
      const path = join(owedFolder, name ?? `pending-charges-${encodeURIComponent(replicaId)}.${tag}.jsonl`);
      new ChargeJournal(path).owe(
        makeUsage({
          requestId,
          accountId: account.id,
          keyPublicId: key.publicId,
          model: "upstream-chat",
          promptTokens: 10,
          completionTokens: 4,
          costNano: 18_000n,
          createdAt: new Date(),
        }),
      );
      const then = new Date(Date.now() - minutesOld * 60_000);
      utimesSync(path, then, then);
      return path;
    };
    // Gone for good (its id had a random part: port 0), one that runs, one stopped seconds ago.
    const gone = journalOf("tollgate-9:0-5f3a", "owed-by-gone", 5);
    const running = journalOf("still-running", "owed-by-running", 5);
    const recent = journalOf("just-stopped", "owed-by-recent", 0);
    // One a start took to record and died with, and one of another store (a deployment on
    // another schema sharing the folder): never this store's to record.
    const abandoned = journalOf(
      "",
      "owed-by-abandoned",
      5,
      `pending-charges-gone-2.${tag}.jsonl.adopting-0a1b2c`,
    );
    const foreign = journalOf(
      "",
      "owed-elsewhere",
      5,
      "pending-charges-tollgate-9%3A0-5f3a.ffffffffffff.jsonl",
    );
    const claim = await claimReplicaId(postgres.url, { replicaId: "still-running" });
    const server = await startServeProcess(configFile, { cwd: folder });
    try {
      expect(server.output()).toContain(
        '"msg":"recorded the charges another replica journaled (it stopped, or lost the database)"',
      );
      const rows = (await store.listUsage()).filter((row) => row.accountId === account.id);
      expect(rows.map((row) => [row.requestId, row.costNano]).sort()).toEqual([
        ["owed-by-abandoned", 18_000n],
        ["owed-by-gone", 18_000n],
      ]);
      expect(existsSync(gone)).toBe(false);
      expect(existsSync(abandoned)).toBe(false);
      expect(existsSync(foreign)).toBe(true);
      expect(readdirSync(owedFolder).filter((name) => name.includes(".adopting-"))).toEqual([]);
      expect(existsSync(running)).toBe(true);
      expect(existsSync(recent)).toBe(true);
      // The id is free again: its replica can come back.
      const again = await claimReplicaId(postgres.url, { replicaId: "tollgate-9:0-5f3a" });
      await again?.close();
    } finally {
      await claim?.close();
      const stopped = once(server.child, "exit");
      server.child.kill("SIGTERM");
      await stopped;
      await store.close();
    }
  });
});

/** The tag of the test's store, as a replica's claim names it (`ReplicaClaim.storeTag`). */
async function storeTag(): Promise<string> {
  if (!("url" in postgres)) throw new Error("no PostgreSQL");
  const probe = await claimReplicaId(postgres.url, { replicaId: "store-tag-probe" });
  if (probe === undefined) throw new Error("no claim on PostgreSQL");
  await probe.close();
  return probe.storeTag;
}
