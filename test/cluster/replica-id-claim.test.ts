/**
 * Regression: every server started on port 0 got the replica id `127.0.0.1:0`, and replicas on
 * different machines that each listened on 127.0.0.1:8080 got `127.0.0.1:8080`. A starting
 * replica releases the open reservations of its own id (SPEC §11), so it released another live
 * replica's reservations, and that replica's running requests were served without being paid
 * for. Now the default id names the machine (and is random on port 0), and on PostgreSQL a
 * server claims its id for its lifetime: a second live server with the same id refuses to start.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { afterEach, describe, expect, it } from "vitest";
import { createAccount } from "../../src/admin/create-account.ts";
import type { Config } from "../../src/catalog/catalog.ts";
import { resolveReplicaId } from "../../src/cluster/resolve-replica-id.ts";
import { startServer } from "../../src/server.ts";
import { claimReplicaId, openStore } from "../../src/store/open-store.ts";
import {
  createDroppedSchema,
  createPostgresTestSchema,
  type PostgresTestSchema,
} from "../store/postgres-test-database.ts";
import { createTestConfig, createUpstreamModelEntry } from "../support/test-server.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the replica id claim tests: ${probe.skipped}.`);
else await probe.drop();

const cleanups: (() => Promise<unknown>)[] = [];
const configuredReplicaId = process.env.TOLLGATE_REPLICA_ID;

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  if (configuredReplicaId === undefined) delete process.env.TOLLGATE_REPLICA_ID;
  else process.env.TOLLGATE_REPLICA_ID = configuredReplicaId;
});

function newSchema(): Promise<PostgresTestSchema> {
  return createDroppedSchema(cleanups);
}

function configOn(database: string): Config {
  return createTestConfig({
    database,
    // Never called: the tests make no request.
    models: [createUpstreamModelEntry("remote", "http://127.0.0.1:9/v1")],
  });
}

async function startOn(database: string) {
  const server = await startServer({ config: configOn(database), logger: false });
  cleanups.push(() => server.close());
  return server;
}

describe("the default replica id", () => {
  it("names the machine for a loopback host, as for a wildcard one", () => {
    for (const host of ["127.0.0.1", "127.4.5.6", "::1", "[::1]", "localhost", "0.0.0.0", "::"]) {
      expect(resolveReplicaId(host, 8080, {}), host).toBe(`${hostname()}:8080`);
    }
    expect(resolveReplicaId("10.1.2.3", 8080, {})).toBe("10.1.2.3:8080");
  });

  it("differs between two servers on port 0", () => {
    const first = resolveReplicaId("127.0.0.1", 0, {});
    const second = resolveReplicaId("127.0.0.1", 0, {});
    expect(first).not.toBe(second);
    expect(first.startsWith(`${hostname()}:0-`)).toBe(true);
  });

  it("is TOLLGATE_REPLICA_ID when set", () => {
    expect(resolveReplicaId("127.0.0.1", 0, { TOLLGATE_REPLICA_ID: " tollgate-1 " })).toBe("tollgate-1");
  });

  it("refuses a TOLLGATE_REPLICA_ID too long to name its journal file, counted URL-encoded", () => {
    expect(resolveReplicaId("127.0.0.1", 0, { TOLLGATE_REPLICA_ID: "r".repeat(200) })).toBe("r".repeat(200));
    expect(() => resolveReplicaId("127.0.0.1", 0, { TOLLGATE_REPLICA_ID: "r".repeat(201) })).toThrow(
      "TOLLGATE_REPLICA_ID is too long: 201 characters once URL-encoded, at most 200 (it names this replica's journal of owed charges, a file name); set a shorter one, such as the host's name.",
    );
    // 34 two-byte characters (six encoded) and 33 slashes (three encoded).
    expect(() =>
      resolveReplicaId("127.0.0.1", 0, { TOLLGATE_REPLICA_ID: "é".repeat(34) + "/".repeat(33) }),
    ).toThrow(/too long: 303 characters/);
  });
});

describe.skipIf("skipped" in probe)("a replica id on one PostgreSQL schema", () => {
  it("refuses a second live server with the same id, and leaves the first one's live reservation alone", async () => {
    const schema = await newSchema();
    process.env.TOLLGATE_REPLICA_ID = "replica-duplicate";
    await startOn(schema.url);
    const store = await openStore(schema.url);
    cleanups.push(() => store.close());
    // A request of the first server, running: its reservation's lease is live.
    const account = await createAccount(store, { name: "acme", balanceNano: 1_000_000_000n });
    const reservation = {
      id: randomUUID(),
      requestId: "req_running",
      accountId: account.id,
      keyPublicId: "keyrunning01",
      model: "remote",
      amountNano: 400_000_000n,
      replicaId: "replica-duplicate",
      leaseExpiresAt: new Date(Date.now() + 60_000),
      createdAt: new Date(),
    };
    expect(await store.reserve(reservation)).toBe("reserved");

    const refused = startOn(schema.url);
    await expect(refused).rejects.toThrow(
      /replica id "replica-duplicate".*set TOLLGATE_REPLICA_ID to a unique value per replica/,
    );
    await expect(refused).rejects.not.toThrow(/\n/);
    expect((await store.listReservations()).map((each) => each.id)).toEqual([reservation.id]);
    expect((await store.getAccountBalance(account.id))?.reservedNano).toBe(400_000_000n);
  });

  it("starts a server with the id once the server that had it has closed", async () => {
    const schema = await newSchema();
    process.env.TOLLGATE_REPLICA_ID = "replica-restarted";
    const first = await startOn(schema.url);
    await first.close();
    const second = await startOn(schema.url);
    expect(second.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it("waits a moment for its id, held by another server recording a gone replica's journal", async () => {
    const schema = await newSchema();
    process.env.TOLLGATE_REPLICA_ID = "replica-briefly-held";
    // As another replica's start holds it while it records this id's journal of owed charges.
    const held = await claimReplicaId(schema.url, { replicaId: "replica-briefly-held" });
    const released = new Promise((resolve) => setTimeout(resolve, 600)).then(() => held?.close());
    const server = await startOn(schema.url);
    await released;
    expect(server.baseUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1$/);
  });

  it("starts two servers on port 0 without TOLLGATE_REPLICA_ID", async () => {
    const schema = await newSchema();
    delete process.env.TOLLGATE_REPLICA_ID;
    const first = await startOn(schema.url);
    const second = await startOn(schema.url);
    expect(first.baseUrl).not.toBe(second.baseUrl);
  });
});
