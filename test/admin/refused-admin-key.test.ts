/**
 * Regression: the README has the printed admin key put in TOLLGATE_ADMIN_KEY, which the server
 * reads as `admin_key`. Once that key was revoked (`keys revoke`, the last admin key), a restart
 * took the configured key as the way in and made no new one, the admin API refused the only key
 * the operator held (401 revoked), and nothing said why. Now a configured key that is a revoked or
 * expired stored key counts as no key: the start makes a new one, and says which setting to
 * change; `keys revoke` says what a restart with this config will do.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { bootstrap } from "../../src/admin/bootstrap.ts";
import { createKey } from "../../src/admin/create-key.ts";
import { LAST_ADMIN_KEY_NOTICE, runKeysCommand } from "../../src/admin/keys-command.ts";
import { nameAdminKeySource } from "../../src/admin/name-admin-key-source.ts";
import { warnOfRefusedAdminKey } from "../../src/admin/warn-of-refused-admin-key.ts";
import { parseApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { collectOutput } from "./cli-output.ts";

const directory = makeTemporaryDirectory();
let store: Store;

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
});

afterEach(async () => {
  await store.close();
});

const publicIdOf = (key: string | undefined) => parseApiKey(key ?? "")?.publicId ?? "";

describe("a configured admin key that the store refuses", () => {
  it("counts as none at start: a new admin key is made, and the configured one stays refused", async () => {
    const first = await bootstrap(store);
    const configured = first.adminKey ?? "";
    await store.revokeApiKey(publicIdOf(configured), new Date());

    const restarted = await bootstrap(store, { configuredAdminKey: configured });
    expect(restarted.refusedAdminKey).toEqual({ publicId: publicIdOf(configured), reason: "revoked" });
    const made = restarted.adminKey ?? "";
    expect(made).toMatch(/^sk-tg-/);
    const authenticator = createAuthenticator({ store, configuredAdminKey: configured });
    expect(await authenticator.authenticate(`Bearer ${made}`)).toMatchObject({ role: "admin" });
    await expect(authenticator.authenticate(`Bearer ${configured}`)).rejects.toThrow(/revoked/);

    // The next start finds the new key: it makes none, and still tells of the configured one.
    const again = await bootstrap(store, { configuredAdminKey: configured });
    expect(again.adminKey).toBeUndefined();
    expect(again.refusedAdminKey?.reason).toBe("revoked");
  });

  it("counts as none once it has expired", async () => {
    const now = new Date("2025-06-01T12:00:00.000Z");
    const expiring = await createKey(
      store,
      { role: "admin", accountId: undefined, expiresAt: new Date("2025-06-01T13:00:00.000Z") },
      { now: () => now },
    );
    const later = () => new Date("2025-06-01T13:00:00.000Z");
    const result = await bootstrap(store, { configuredAdminKey: expiring.key, now: later });
    expect(result.refusedAdminKey).toEqual({ publicId: expiring.record.publicId, reason: "expired" });
    expect(result.adminKey).toBeDefined();
  });

  it("counts as none when it is a user's key: a new admin key is made, and the configured one stays the user's", async () => {
    const first = await bootstrap(store);
    const starter = first.starterKey ?? "";
    const restarted = await bootstrap(store, { configuredAdminKey: starter });
    expect(restarted.refusedAdminKey).toEqual({ publicId: publicIdOf(starter), reason: "user" });
    // The first start's admin key still works: no new one is needed.
    expect(restarted.adminKey).toBeUndefined();
    await store.revokeApiKey(publicIdOf(first.adminKey), new Date());
    const made = (await bootstrap(store, { configuredAdminKey: starter })).adminKey ?? "";
    expect(made).toMatch(/^sk-tg-/);
    const authenticator = createAuthenticator({ store, configuredAdminKey: starter });
    expect(await authenticator.authenticate(`Bearer ${starter}`)).toMatchObject({ role: "user" });
  });

  it("is not confused with a key of the operator's own, nor with another secret under the same public id", async () => {
    const stored = await createKey(store, { role: "admin", accountId: undefined });
    await store.revokeApiKey(stored.record.publicId, new Date());
    const ownSecret = "an-operator-chosen-secret-of-enough-length-0123456789";
    const sameIdOtherSecret = `sk-tg-${stored.record.publicId}-${"x".repeat(43)}`;
    for (const configuredAdminKey of [ownSecret, sameIdOtherSecret]) {
      const result = await bootstrap(store, { configuredAdminKey });
      expect(result.refusedAdminKey).toBeUndefined();
      expect(result.adminKey).toBeUndefined();
    }
  });

  it("is warned of at start, naming the setting to change", () => {
    const warnings: string[] = [];
    const logger = { warn: (_details: object, message: string) => warnings.push(message) };
    const refusedAdminKey = { publicId: "abcdefghijkl", reason: "revoked" as const };
    const saved = process.env.TOLLGATE_ADMIN_KEY;
    try {
      process.env.TOLLGATE_ADMIN_KEY = "sk-tg-abcdefghijkl-secret";
      warnOfRefusedAdminKey({ adminKey: "sk-tg-new", refusedAdminKey }, "/srv/tollgate.yaml", logger);
      delete process.env.TOLLGATE_ADMIN_KEY;
      warnOfRefusedAdminKey({ adminKey: undefined, refusedAdminKey }, "/srv/tollgate.yaml", logger);
      warnOfRefusedAdminKey({ adminKey: undefined, refusedAdminKey: undefined }, undefined, logger);
      warnOfRefusedAdminKey(
        { adminKey: undefined, refusedAdminKey: { publicId: "mnopqrstuvwx", reason: "user" } },
        "/srv/tollgate.yaml",
        logger,
      );
    } finally {
      if (saved === undefined) delete process.env.TOLLGATE_ADMIN_KEY;
      else process.env.TOLLGATE_ADMIN_KEY = saved;
    }
    expect(warnings).toEqual([
      "TOLLGATE_ADMIN_KEY is the stored admin key abcdefghijkl, which was revoked: the admin API refuses it. Put the new admin key printed at this start there, or remove it",
      "admin_key in /srv/tollgate.yaml is the stored admin key abcdefghijkl, which was revoked: the admin API refuses it. Put an admin key that works there (the store holds one), or remove it",
      "admin_key in /srv/tollgate.yaml is the user key mnopqrstuvwx, not an admin key: it stays that user's key, and the admin API refuses it. Put an admin key that works there (the store holds one), or remove it",
    ]);
  });

  it("names TOLLGATE_ADMIN_KEY when it is set, else the config file's admin_key", () => {
    expect(nameAdminKeySource("/srv/tollgate.yaml", { TOLLGATE_ADMIN_KEY: "k" })).toBe("TOLLGATE_ADMIN_KEY");
    expect(nameAdminKeySource("/srv/tollgate.yaml", { TOLLGATE_ADMIN_KEY: "" })).toBe(
      "admin_key in /srv/tollgate.yaml",
    );
  });
});

describe("keys revoke of the last admin key", () => {
  async function revoke(publicId: string, configuredAdminKey?: string): Promise<string[]> {
    const out = collectOutput();
    await runKeysCommand(store, ["revoke", publicId], out, {
      ...(configuredAdminKey === undefined
        ? {}
        : { configuredAdminKey: { key: configuredAdminKey, source: "TOLLGATE_ADMIN_KEY" } }),
    });
    return out.lines;
  }

  it("says so when the configured admin key is this very key, and that a restart makes a new one", async () => {
    const admin = await createKey(store, { role: "admin", accountId: undefined });
    const lines = await revoke(admin.record.publicId, admin.key);
    expect(lines[1]).toBe(
      "That was the last admin key in the store, and TOLLGATE_ADMIN_KEY names this very key: no admin key works now. Restart the server: `tollgate serve` makes a new admin key and prints it once. Then put the new key in TOLLGATE_ADMIN_KEY in place of the revoked one, which is refused for good.",
    );
    // What it says of the restart is what the restart does.
    expect((await bootstrap(store, { configuredAdminKey: admin.key })).adminKey).toBeDefined();
  });

  it("names the configured key when it is another revoked one", async () => {
    const configured = await createKey(store, { role: "admin", accountId: undefined });
    const last = await createKey(store, { role: "admin", accountId: undefined });
    await revoke(configured.record.publicId, configured.key);
    const lines = await revoke(last.record.publicId, configured.key);
    expect(lines[1]).toContain(
      `TOLLGATE_ADMIN_KEY names key ${configured.record.publicId}, which was revoked too: no admin key works now.`,
    );
  });

  it("names the configured key when it is a user's key", async () => {
    const first = await bootstrap(store);
    const user = first.starterKey ?? "";
    const lines = await revoke(publicIdOf(first.adminKey), user);
    expect(lines[1]).toBe(
      `That was the last admin key in the store, and TOLLGATE_ADMIN_KEY names the user key ${publicIdOf(user)}, which is no admin key: no admin key works now. Restart the server: \`tollgate serve\` makes a new admin key and prints it once. Then put the new key in TOLLGATE_ADMIN_KEY in place of the user key.`,
    );
  });

  it("says that a configured key of the operator's own is now the only way in, and no new key comes", async () => {
    const admin = await createKey(store, { role: "admin", accountId: undefined });
    const lines = await revoke(
      admin.record.publicId,
      "an-operator-chosen-secret-of-enough-length-0123456789",
    );
    expect(lines[1]).toBe(
      "That was the last admin key in the store: the admin API now takes only the admin key that TOLLGATE_ADMIN_KEY sets, and a restart makes no new one while it is set.",
    );
    expect(
      (
        await bootstrap(store, {
          configuredAdminKey: "an-operator-chosen-secret-of-enough-length-0123456789",
        })
      ).adminKey,
    ).toBeUndefined();
  });

  it("keeps the general notice when this command's config sets no admin key", async () => {
    const admin = await createKey(store, { role: "admin", accountId: undefined });
    expect((await revoke(admin.record.publicId))[1]).toBe(LAST_ADMIN_KEY_NOTICE);
  });
});
