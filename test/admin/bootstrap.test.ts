import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bootstrap } from "../../src/admin/bootstrap.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { parseApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";

const directory = makeTemporaryDirectory();
let store: Store;

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
});

afterEach(async () => {
  await store.close();
});

describe("bootstrap", () => {
  it("makes an admin key, the starter account and a starter key on the first start", async () => {
    const result = await bootstrap(store);
    expect(result.accountName).toBe("starter");
    const adminKey = result.adminKey ?? "";
    const starterKey = result.starterKey ?? "";
    expect(parseApiKey(adminKey)).toBeDefined();
    expect(parseApiKey(starterKey)).toBeDefined();

    const authenticator = createAuthenticator({ store });
    expect(await authenticator.authenticate(`Bearer ${adminKey}`)).toMatchObject({
      role: "admin",
      accountId: undefined,
    });
    const starter = await store.getAccountByName("starter");
    expect(await authenticator.authenticate(`Bearer ${starterKey}`)).toMatchObject({
      role: "user",
      accountId: starter?.id,
    });
  });

  it("makes nothing on later starts", async () => {
    await bootstrap(store);
    expect(await bootstrap(store)).toEqual({
      adminKey: undefined,
      starterKey: undefined,
      accountName: undefined,
    });
    expect(await store.listAccounts()).toHaveLength(1);
    expect(await store.listApiKeys()).toHaveLength(2);
  });

  it("makes a new admin key once the only one was revoked, so the operator can get back in", async () => {
    const first = await bootstrap(store);
    await store.revokeApiKey(parseApiKey(first.adminKey ?? "")?.publicId ?? "", new Date());
    const second = await bootstrap(store);
    expect(second).toMatchObject({ starterKey: undefined, accountName: undefined });
    const adminKey = second.adminKey ?? "";
    expect(adminKey).not.toBe(first.adminKey);
    expect(await createAuthenticator({ store }).authenticate(`Bearer ${adminKey}`)).toMatchObject({
      role: "admin",
    });
    // And only once: the next start finds the new key.
    expect((await bootstrap(store)).adminKey).toBeUndefined();
  });

  it("makes a new admin key when every stored one has expired, and none while one still works", async () => {
    const now = new Date("2025-06-01T12:00:00.000Z");
    const expiring = await createKey(
      store,
      { role: "admin", accountId: undefined, expiresAt: new Date("2025-06-02T00:00:00.000Z") },
      { now: () => now },
    );
    expect((await bootstrap(store, { now: () => now })).adminKey).toBeUndefined();
    const later = () => new Date("2025-06-02T00:00:00.000Z");
    const made = await bootstrap(store, { now: later });
    expect(made.adminKey).toBeDefined();
    expect(made.adminKey).not.toBe(expiring.key);
  });

  it("makes no admin key while one is configured, even with every stored one revoked", async () => {
    const first = await bootstrap(store);
    await store.revokeApiKey(parseApiKey(first.adminKey ?? "")?.publicId ?? "", new Date());
    expect((await bootstrap(store, { configuredAdminKey: "configured-secret" })).adminKey).toBeUndefined();
  });

  it("makes no admin key when one is configured, but still the starter account and key", async () => {
    const result = await bootstrap(store, { configuredAdminKey: "configured-secret" });
    expect(result.adminKey).toBeUndefined();
    expect(result.starterKey).toBeDefined();
    expect(await store.hasAdminKey()).toBe(false);
    expect(await bootstrap(store, { configuredAdminKey: "configured-secret" })).toEqual({
      adminKey: undefined,
      starterKey: undefined,
      accountName: undefined,
    });
  });

  it("makes only the admin key when accounts were made before the first start", async () => {
    await store.insertAccount({
      id: "00000000-0000-4000-8000-000000000001",
      name: "acme",
      balanceNano: 0n,
      createdAt: new Date(),
    });
    const result = await bootstrap(store);
    expect(result.adminKey).toBeDefined();
    expect(result.starterKey).toBeUndefined();
    expect(await store.getAccountByName("starter")).toBeUndefined();
  });

  it("gives the starter account the requested opening balance", async () => {
    await bootstrap(store, { starterBalanceNano: 5_000_000_000n });
    expect((await store.getAccountByName("starter"))?.balanceNano).toBe(5_000_000_000n);
  });
});
