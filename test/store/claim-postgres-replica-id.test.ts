import { afterEach, describe, expect, it, vi } from "vitest";
import {
  claimPostgresReplicaId,
  type ReplicaClaim,
  type ReplicaClaimEvent,
} from "../../src/store/postgres/claim-postgres-replica-id.ts";
import { terminateBackends, withApplicationName } from "./postgres-backends.ts";
import {
  createDroppedSchema,
  createPostgresTestSchema,
  type PostgresTestSchema,
} from "./postgres-test-database.ts";

/**
 * A replica id claimed on PostgreSQL (a session advisory lock on a connection of its own): one
 * live holder per schema and id, given up on close, and taken again in the background when its
 * connection breaks. Each test works in a schema of its own and terminates only its own backends.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the replica id claim tests: ${probe.skipped}.`);
else await probe.drop();

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function newSchema(): Promise<PostgresTestSchema> {
  return createDroppedSchema(cleanups);
}

async function claim(
  url: string,
  replicaId: string,
  onEvent?: (event: ReplicaClaimEvent) => void,
  retryMilliseconds = 50,
): Promise<ReplicaClaim> {
  const taken = await claimPostgresReplicaId(url, {
    replicaId,
    retryMilliseconds,
    ...(onEvent === undefined ? {} : { onEvent }),
  });
  cleanups.push(() => taken.close());
  return taken;
}

describe.skipIf("skipped" in probe)("claiming a replica id on PostgreSQL", () => {
  it("refuses a second claim of the same id in the same schema, and frees the id on close", async () => {
    const schema = await newSchema();
    const first = await claim(schema.url, "replica-a");
    await expect(claim(schema.url, "replica-a")).rejects.toThrow(
      `Another running Tollgate server already uses the replica id "replica-a"`,
    );
    // Another id, or the same id in another schema, is another claim.
    await claim(schema.url, "replica-b");
    await claim((await newSchema()).url, "replica-a");
    await first.close();
    await claim(schema.url, "replica-a");
  });

  it("takes the claim again after its connection was terminated, without ending the process", async () => {
    const schema = await newSchema();
    const applicationName = `${schema.schema}_claim`;
    const events: string[] = [];
    await claim(withApplicationName(schema.url, applicationName), "replica-a", (event) =>
      events.push(event.type),
    );
    expect(await terminateBackends(applicationName)).toBe(1);
    await vi.waitFor(() => expect(events).toEqual(["lost", "retaken"]), { timeout: 5_000 });
    await expect(claim(schema.url, "replica-a")).rejects.toThrow(/replica id "replica-a"/);
  });

  it("reports a server that took the id while the claim was lost, and takes it back once that one closed", async () => {
    const schema = await newSchema();
    const applicationName = `${schema.schema}_claim`;
    const events: ReplicaClaimEvent[] = [];
    // Retries far apart: the other server takes the id before the first retry.
    await claim(
      withApplicationName(schema.url, applicationName),
      "replica-a",
      (event) => events.push(event),
      1_000,
    );
    await terminateBackends(applicationName);
    await vi.waitFor(() => expect(events.map((event) => event.type)).toEqual(["lost"]));
    const other = await claim(schema.url, "replica-a");
    await vi.waitFor(() => expect(events.map((event) => event.type)).toContain("claimed-elsewhere"), {
      timeout: 5_000,
    });
    await other.close();
    await vi.waitFor(() => expect(events.at(-1)?.type).toBe("retaken"), { timeout: 5_000 });
    expect(new Set(events.map((event) => event.type))).toEqual(
      new Set(["lost", "claimed-elsewhere", "retaken"]),
    );
  });
});

describe.skipIf("skipped" in probe)("the clock skew a claim measures", () => {
  it("is this machine's clock less the database's", async () => {
    const schema = await newSchema();
    const level = await claim(schema.url, "replica-level");
    expect(Math.abs(level.clockSkewMs)).toBeLessThan(2_000);

    const realNow = Date.now;
    Date.now = () => realNow() + 120_000;
    try {
      const ahead = await claim(schema.url, "replica-ahead");
      expect(ahead.clockSkewMs).toBeGreaterThan(118_000);
      expect(ahead.clockSkewMs).toBeLessThan(122_000);
    } finally {
      Date.now = realNow;
    }
  });
});
