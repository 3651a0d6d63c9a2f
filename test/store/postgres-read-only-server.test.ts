import { randomBytes } from "node:crypto";
import { afterEach, describe, expect, it } from "vitest";
import { normalizeError } from "../../src/api/errors.ts";
import { openPostgresStore } from "../../src/store/postgres/open-postgres-store.ts";
import { terminateBackends, withApplicationName } from "./postgres-backends.ts";
import {
  createDroppedSchema,
  createPostgresTestSchema,
  runStatements,
  testPostgresUrl,
} from "./postgres-test-database.ts";
import { makeAccount } from "./store-fixtures.ts";

/**
 * The PostgreSQL store after a failover that leaves its pooled connections on a server that can
 * no longer write (the old primary, now a standby behind the same address). The test plays it
 * with a role of its own: the store's one connection is reopened while the role's sessions are
 * read-only, then new sessions are writable again, as a connection to the new primary would be.
 */
const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL read-only server tests: ${probe.skipped}.`);
else await probe.drop();

const cleanups: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

describeWithPostgres("the PostgreSQL store on a connection to a server that became read-only", () => {
  it("fails the write that finds it with store_unavailable, then writes on a new connection", async () => {
    const role = `tollgate_test_role_${randomBytes(6).toString("hex")}`;
    // Dropped last, once the store is closed and its schema (whose tables the role owns) is gone.
    await runStatements(testPostgresUrl(), [`create role ${role} login superuser`]);
    cleanups.push(() => runStatements(testPostgresUrl(), [`drop role if exists ${role}`]));
    const schema = await createDroppedSchema(cleanups);
    const applicationName = `${schema.schema}_read_only`;
    const url = new URL(withApplicationName(schema.url, applicationName));
    url.username = role;
    const store = await openPostgresStore(url.toString(), { poolSize: 1 });
    cleanups.push(() => store.close());
    expect(await store.insertAccount(makeAccount({ name: "before" }))).toBe("created");

    await runStatements(testPostgresUrl(), [`alter role ${role} set default_transaction_read_only = on`]);
    expect(await terminateBackends(applicationName)).toBe(1);
    // Reads go on, on a new connection that cannot write.
    await expect
      .poll(() => store.hasAccounts().catch((error: unknown) => normalizeError(error).code), {
        timeout: 10_000,
      })
      .toBe(true);
    await runStatements(testPostgresUrl(), [`alter role ${role} reset default_transaction_read_only`]);

    const refused = await store.insertAccount(makeAccount({ name: "refused" })).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect((refused as { code?: string } | undefined)?.code).toBe("25006");
    expect(normalizeError(refused)).toMatchObject({ code: "store_unavailable", status: 503 });

    expect(await store.insertAccount(makeAccount({ name: "after" }))).toBe("created");
    expect((await store.listAccounts()).map((account) => account.name).sort()).toEqual(["after", "before"]);
  });
});
