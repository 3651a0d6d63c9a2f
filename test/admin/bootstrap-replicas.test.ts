/**
 * Replicas starting together on one PostgreSQL store take turns at the first-run bootstrap
 * (Store.runAlone). Regression: each saw no admin key that worked and each made and printed one,
 * so a deployment had several working admin keys, each secret only in one replica's log.
 */
import { afterAll, describe, expect, it } from "vitest";
import { bootstrap } from "../../src/admin/bootstrap.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { createPostgresTestSchema } from "../store/postgres-test-database.ts";

const probe = await createPostgresTestSchema();
if ("skipped" in probe) console.warn(`Skipping the PostgreSQL bootstrap tests: ${probe.skipped}.`);
const describeWithPostgres = "skipped" in probe ? describe.skip : describe;

const stores: Store[] = [];

afterAll(async () => {
  for (const store of stores.splice(0)) await store.close();
  if (!("skipped" in probe)) await probe.drop();
});

describeWithPostgres("bootstrap on PostgreSQL replicas starting together", () => {
  it("makes one admin key and one starter key, whichever replica makes them", async () => {
    if ("skipped" in probe) return;
    const replicas = 6;
    for (let index = 0; index < replicas; index++) stores.push(await openStore(probe.url, { owner: true }));
    const results = await Promise.all(stores.map((store) => bootstrap(store, { starterBalanceNano: 0n })));
    expect(results.filter((result) => result.adminKey !== undefined)).toHaveLength(1);
    expect(results.filter((result) => result.starterKey !== undefined)).toHaveLength(1);
    const adminKeys = (await stores[0]?.listApiKeys())?.filter((key) => key.role === "admin") ?? [];
    expect(adminKeys).toHaveLength(1);
  });
});
