import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it, onTestFinished } from "vitest";
import { parseAmount } from "../../src/billing/money.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema, type PostgresTestSchema } from "../store/postgres-test-database.ts";
import { findFreePort } from "../support/free-port.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { checkTestRedis, createTestPrefix, deleteTestKeys } from "./redis-test-connection.ts";
import { type ReplicaProcess, runCli, startReplica } from "./replica-process.ts";

/**
 * Scale-out, end to end: three `tollgate serve` processes on one PostgreSQL schema and one
 * Redis prefix. Skips, with the reason, when either is unreachable, except under CI.
 */
const redis = await checkTestRedis();
const postgres: PostgresTestSchema | { skipped: string } =
  "url" in redis ? await createPostgresTestSchema() : { skipped: redis.skipped };
if ("skipped" in postgres && "url" in redis) console.warn(`skipping the replica test: ${postgres.skipped}`);

const ADMIN_KEY = "replicas-test-admin-key-0123456789";
/** The rate-limited key's requests per minute. */
const RPM = 30;
const BURST = 300;

let folder: string;
let configFile: string;
let env: NodeJS.ProcessEnv;
let prefix: string;
let store: Store;
const replicas: ReplicaProcess[] = [];

async function cli(...args: string[]) {
  return await runCli(args, { configFile, env });
}

async function createKey(account: string, ...options: string[]): Promise<{ key: string; publicId: string }> {
  const created = await cli("keys", "create", "--account", account, ...options);
  expect(created.status, created.stderr).toBe(0);
  const key = created.stdout.split("\n").find((line) => line.startsWith("sk-tg-"));
  if (key === undefined) throw new Error(`no key in: ${created.stdout}`);
  return { key, publicId: key.split("-")[2]! };
}

async function showAccount(name: string): Promise<{ balance: bigint; reserved: bigint; spent: bigint }> {
  const shown = await cli("accounts", "show", name, "--format", "json");
  expect(shown.status, shown.stderr).toBe(0);
  const fields = JSON.parse(shown.stdout) as { balance: string; reserved: string; spent: string };
  return {
    balance: parseAmount(fields.balance),
    reserved: parseAmount(fields.reserved),
    spent: parseAmount(fields.spent),
  };
}

function chat(replica: ReplicaProcess, key: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${replica.origin}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Hi" }], ...body }),
  });
}

/** Whether `/ready` answers 200: the replica listens and its models are loaded. */
async function isReady(replica: ReplicaProcess): Promise<boolean> {
  return await fetch(`${replica.origin}/ready`).then(
    async (response) => {
      await response.arrayBuffer();
      return response.status === 200;
    },
    () => false,
  );
}

/**
 * Three ready replicas, whatever an earlier test did to them: one that exited (killed, or shut
 * down) is started again with its id and port, one still starting is waited for.
 */
async function ensureReplicasReady(): Promise<void> {
  await Promise.all(
    [0, 1, 2].map(async (index) => {
      const replica = replicas[index]!;
      if (replica.child.exitCode !== null || replica.child.signalCode !== null) {
        replicas[index] = await startReplica({ id: replica.id, port: replica.port, configFile, env });
        return;
      }
      await expect.poll(() => isReady(replica), { timeout: 60_000, interval: 100 }).toBe(true);
    }),
  );
}

async function expectAuditPasses(): Promise<void> {
  const audit = await cli("audit");
  expect(audit.stdout + audit.stderr).toMatch(/passed/i);
  expect(audit.status).toBe(0);
}

describe.skipIf(!("url" in redis && "url" in postgres))(
  "three replicas on one PostgreSQL and one Redis",
  () => {
    beforeAll(async () => {
      if (!("url" in redis && "url" in postgres)) return;
      folder = mkdtempSync(join(tmpdir(), "tollgate-replicas-"));
      prefix = createTestPrefix("replicas");
      const [tiny, endless] = await Promise.all([getTestModelPath(), getTestModelPath({ endless: true })]);
      configFile = join(folder, "tollgate.yaml");
      writeFileSync(
        configFile,
        [
          "models:",
          "  - id: tiny",
          "    kind: chat",
          // Expensive tokens: a balance of 0.1 pays for a handful of requests.
          '    pricing: { input_per_million: "1000", output_per_million: "1000" }',
          "    context_length: 512",
          `    engine: { type: llama, model: "${tiny}", parallel: 2, max_queue: 400, threads: 1, gpu: false }`,
          "  - id: endless",
          "    kind: chat",
          '    pricing: { input_per_million: "1", output_per_million: "2" }',
          "    context_length: 2048",
          `    engine: { type: llama, model: "${endless}", parallel: 1, max_queue: 0, threads: 1, gpu: false }`,
          "",
        ].join("\n"),
      );
      env = {
        ...process.env,
        TOLLGATE_CONFIG: undefined,
        TOLLGATE_DATABASE_URL: postgres.url,
        TOLLGATE_REDIS_URL: redis.url,
        TOLLGATE_REDIS_PREFIX: prefix,
        // A slow Redis must show as 503 here, never as requests admitted past the limit.
        TOLLGATE_REDIS_FAILURE_POLICY: "fail-closed",
        TOLLGATE_ADMIN_KEY: ADMIN_KEY,
      };
      // Migrates the schema once, before the replicas race for it.
      store = await openStore(postgres.url);
      const ports = await Promise.all([0, 1, 2].map(() => findFreePort()));
      replicas.push(
        ...(await Promise.all(
          ports.map((port, index) => startReplica({ id: `replica-${index}`, port, configFile, env })),
        )),
      );
    }, 120_000);

    beforeEach(ensureReplicasReady, 120_000);

    afterAll(async () => {
      await Promise.all(replicas.map((replica) => replica.stop("SIGKILL")));
      await store?.close();
      if ("url" in postgres) await postgres.drop();
      if ("url" in redis && prefix !== undefined) await deleteTestKeys(redis.url, prefix);
      if (folder !== undefined) rmSync(folder, { recursive: true, force: true });
    });

    it(`never overspends a small balance, and holds the rpm across replicas, under ${BURST} concurrent requests`, async () => {
      expect((await cli("accounts", "create", "small", "--balance", "0.1")).status).toBe(0);
      const { key } = await createKey("small", "--rpm", String(RPM));

      const started = Date.now();
      const outcomes = await Promise.all(
        Array.from({ length: BURST }, async (_, index) => {
          const response = await chat(replicas[index % replicas.length]!, key, {
            model: "tiny",
            max_tokens: 3,
          });
          const body = (await response.json()) as { error?: { code: string } };
          return { status: response.status, code: body.error?.code, replica: index % replicas.length };
        }),
      );
      const elapsedSeconds = (Date.now() - started) / 1000;

      const count = (predicate: (outcome: (typeof outcomes)[number]) => boolean) =>
        outcomes.filter(predicate).length;
      const succeeded = count((outcome) => outcome.status === 200);
      const poor = count((outcome) => outcome.status === 403 && outcome.code === "insufficient_balance");
      const limited = count((outcome) => outcome.status === 429 && outcome.code === "rate_limit_exceeded");
      console.info(
        `replicas: ${BURST} requests in ${elapsedSeconds.toFixed(1)} s: ${succeeded} ran, ${poor} refused for the balance, ${limited} for the rpm`,
      );
      expect(succeeded + poor + limited, JSON.stringify(outcomes.filter((o) => o.status >= 500))).toBe(BURST);
      // Past the rate limit: the full bucket, plus what refilled while the burst ran.
      const admitted = succeeded + poor;
      expect(admitted).toBeGreaterThanOrEqual(RPM);
      expect(admitted).toBeLessThanOrEqual(RPM + Math.ceil((elapsedSeconds * RPM) / 60));
      // Every replica refused some: the bucket is shared, not one per replica.
      for (const index of [0, 1, 2]) {
        expect(outcomes.some((outcome) => outcome.replica === index && outcome.status === 429)).toBe(true);
      }
      // The balance was the binding limit: some ran, the rest were refused, none overdrew it.
      expect(succeeded).toBeGreaterThan(0);
      expect(poor).toBeGreaterThan(0);
      const money = await showAccount("small");
      expect(money.reserved).toBe(0n);
      expect(money.spent).toBeGreaterThan(0n);
      expect(money.spent).toBeLessThanOrEqual(parseAmount("0.1"));
      expect(money.balance).toBeGreaterThanOrEqual(0n);
      await expectAuditPasses();
    }, 120_000);

    it("refuses, on every other replica, a key revoked through one replica's admin API, told over the bus", async () => {
      expect((await cli("accounts", "create", "revocation", "--balance", "1")).status).toBe(0);
      const { key, publicId } = await createKey("revocation");
      const listModels = (replica: ReplicaProcess) =>
        fetch(`${replica.origin}/v1/models`, { headers: { authorization: `Bearer ${key}` } }).then(
          async (response) => {
            await response.arrayBuffer();
            return response.status;
          },
        );
      // The other replicas have the key in their caches now.
      expect(await listModels(replicas[1]!)).toBe(200);
      expect(await listModels(replicas[2]!)).toBe(200);
      const listener = new Redis("url" in redis ? redis.url : "");
      onTestFinished(() => listener.disconnect());
      const heard: string[] = [];
      listener.on("message", (_channel: string, message: string) => heard.push(message));
      await listener.subscribe(`${prefix}invalidate`);

      const revoked = await fetch(`${replicas[0]!.origin}/admin/keys/${publicId}/revoke`, {
        method: "POST",
        headers: { authorization: `Bearer ${ADMIN_KEY}` },
      });
      expect(revoked.status).toBe(200);
      const since = performance.now();
      expect(await listModels(replicas[0]!)).toBe(401);
      // How soon is pinned where a clock can be held still: the bus in servers-with-redis.test.ts,
      // the key cache's 1 s in authenticator.test.ts. Here: every replica comes to refuse the key,
      // and the revoking one told the others on the bus.
      const delays = await Promise.all(
        [replicas[1]!, replicas[2]!].map(async (replica) => {
          await expect.poll(() => listModels(replica), { timeout: 20_000, interval: 10 }).toBe(401);
          return Math.round(performance.now() - since);
        }),
      );
      console.info(`replicas: the revocation reached the others after ${delays.join(" and ")} ms`);
      await expect
        .poll(() => heard.map((message) => (JSON.parse(message) as { event: unknown }).event), {
          timeout: 20_000,
        })
        .toContainEqual({ type: "key-changed", publicId });
    }, 60_000);

    it("releases a killed replica's reservations when it restarts, never another replica's, live or expired", async () => {
      expect((await cli("accounts", "create", "crash", "--balance", "5")).status).toBe(0);
      const { key, publicId } = await createKey("crash");
      const account = await store.getAccountByName("crash");
      if (account === undefined) throw new Error("no account");
      // Reservations of replicas outside this test: one running now, one whose replica died.
      const foreign = (replicaId: string, leaseExpiresAt: Date) =>
        store.reserve({
          id: randomUUID(),
          requestId: `req_${replicaId}`,
          accountId: account.id,
          keyPublicId: publicId,
          model: "endless",
          amountNano: 1000n,
          replicaId,
          leaseExpiresAt,
          createdAt: new Date(),
        });
      expect(await foreign("replica-elsewhere", new Date(Date.now() + 60_000))).toBe("reserved");
      expect(await foreign("replica-gone", new Date(Date.now() - 60_000))).toBe("reserved");

      const doomed = replicas[2]!;
      const response = await chat(doomed, key, { model: "endless", stream: true, max_tokens: 1000 });
      expect(response.status).toBe(200);
      await response.body!.getReader().read();
      const holders = async () =>
        (await store.listReservations()).map((reservation) => reservation.replicaId).sort();
      // The expired one may go at any moment: the live replicas sweep expired reservations.
      const withoutExpired = async () => (await holders()).filter((holder) => holder !== "replica-gone");
      expect(await withoutExpired()).toEqual([doomed.id, "replica-elsewhere"]);

      expect(await doomed.stop("SIGKILL")).toBe("SIGKILL");
      expect(await withoutExpired()).toEqual([doomed.id, "replica-elsewhere"]);
      expect((await cli("audit")).status).toBe(1);

      const restarted = await startReplica({
        id: doomed.id,
        port: doomed.port,
        configFile,
        env,
        waitForReady: false,
      });
      replicas[2] = restarted;
      // Its own only: the expired one is left to the replicas' sweeps, which wait until the
      // store has answered for a while (keep-leases.test.ts), since just after a database
      // outage a live replica's reservations look expired too.
      expect(restarted.output()).toMatch(/"released":1,.*released reservations left by the previous run/);
      expect(await withoutExpired()).toEqual(["replica-elsewhere"]);

      // The live one is its replica's to settle; here, the test stands in for it, and for the
      // sweep that releases the expired one (unless one of the replicas' did already).
      expect(await store.releaseReservations({ replicaId: "replica-elsewhere" })).toBe(1);
      await store.releaseReservations({ replicaId: "replica-gone" });
      expect(await showAccount("crash")).toEqual({ balance: parseAmount("5"), reserved: 0n, spent: 0n });
      await expectAuditPasses();
    }, 90_000);

    it("shuts every replica down cleanly, Redis connections included", async () => {
      // Three replicas that served requests, so that they hold Redis connections and buckets.
      expect((await cli("accounts", "create", "shutdown", "--balance", "1")).status).toBe(0);
      const { key } = await createKey("shutdown", "--rpm", "100");
      for (const replica of replicas) {
        expect((await chat(replica, key, { model: "tiny", max_tokens: 1 })).status).toBe(200);
      }
      const codes = await Promise.all(replicas.map((replica) => replica.stop("SIGTERM")));
      expect(codes).toEqual([0, 0, 0]);
    }, 30_000);
  },
);
