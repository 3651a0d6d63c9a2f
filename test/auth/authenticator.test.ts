import { beforeEach, describe, expect, it, vi } from "vitest";
import { generateApiKey } from "../../src/auth/api-key.ts";
import { createAuthenticator } from "../../src/auth/authenticator.ts";
import { isModelAllowedForKey } from "../../src/chat/request-key.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { ApiKeyRecord, Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";

const directory = makeTemporaryDirectory();
const ACCOUNT_ID = "00000000-0000-4000-8000-0000000000aa";
const START = Date.parse("2025-06-01T00:00:00.000Z");

let store: Store;
let clock: { time: number };

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  await store.insertAccount({ id: ACCOUNT_ID, name: "acme", balanceNano: 0n, createdAt: new Date(START) });
  clock = { time: START };
  return async () => {
    await store.close();
  };
});

async function insertKey(overrides: Partial<ApiKeyRecord> = {}): Promise<{ key: string; publicId: string }> {
  const generated = generateApiKey();
  await store.insertApiKey({
    id: crypto.randomUUID(),
    publicId: generated.publicId,
    accountId: ACCOUNT_ID,
    role: "user",
    name: "ci",
    secretHash: generated.secretHash,
    allowedModels: undefined,
    rpm: undefined,
    tpm: undefined,
    expiresAt: undefined,
    revokedAt: undefined,
    createdAt: new Date(START),
    ...overrides,
  });
  return { key: generated.key, publicId: generated.publicId };
}

function authenticator(options: { configuredAdminKey?: string } = {}) {
  return createAuthenticator({ store, now: () => clock.time, steadyNow: () => clock.time, ...options });
}

async function rejection(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof AppError)) throw new Error(`expected an AppError, got ${String(error)}`);
  return error;
}

describe("authenticate", () => {
  it("accepts a valid key and returns its settings", async () => {
    const { key, publicId } = await insertKey({ allowedModels: ["m1"], rpm: 60, tpm: 1000 });
    expect(await authenticator().authenticate(`Bearer ${key}`)).toEqual({
      publicId,
      accountId: ACCOUNT_ID,
      role: "user",
      allowedModels: ["m1"],
      rpm: 60,
      tpm: 1000,
      name: "ci",
    });
  });

  it("accepts the scheme in any case and extra spaces", async () => {
    const { key, publicId } = await insertKey();
    expect(await authenticator().authenticate(`bearer   ${key}  `)).toEqual({
      publicId,
      accountId: ACCOUNT_ID,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      name: "ci",
    });
  });

  it.each([
    ["a missing header", undefined, /No API key provided/],
    ["an empty header", "", /No API key provided/],
    ["Bearer without a key", "Bearer ", /No API key provided/],
    ["another scheme", "Basic dXNlcjpwYXNz", /Bearer scheme/],
    ["a bare key without Bearer", "sk-tg-abcdef123456-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", /Bearer scheme/],
    ["a malformed key", "Bearer sk-tg-nope", /not shaped like a Tollgate key/],
  ])("refuses %s with invalid_api_key", async (_case, header, message) => {
    const error = await rejection(authenticator().authenticate(header));
    expect(error.code).toBe("invalid_api_key");
    expect(error.status).toBe(401);
    expect(error.message).toMatch(message);
    expect(error.message).toContain("Authorization: Bearer sk-tg-...");
  });

  it("refuses an unknown key and a wrong secret with the same message", async () => {
    const { publicId } = await insertKey();
    const unknown = await rejection(authenticator().authenticate(`Bearer ${generateApiKey().key}`));
    const wrongSecret = await rejection(
      authenticator().authenticate(`Bearer sk-tg-${publicId}-${"B".repeat(43)}`),
    );
    expect(unknown.code).toBe("invalid_api_key");
    expect(wrongSecret.code).toBe("invalid_api_key");
    expect(wrongSecret.message).toBe(unknown.message);
    expect(unknown.message).toMatch(/^Incorrect API key provided\./);
  });

  it("never puts the key in the message", async () => {
    const { key } = await insertKey({ revokedAt: new Date(START) });
    const error = await rejection(authenticator().authenticate(`Bearer ${key}`));
    expect(error.message).not.toContain(key.slice(6));
  });

  it("refuses a revoked key as revoked or expired", async () => {
    const { key } = await insertKey({ revokedAt: new Date(START - 1000) });
    const error = await rejection(authenticator().authenticate(`Bearer ${key}`));
    expect(error.code).toBe("invalid_api_key");
    expect(error.message).toMatch(/revoked or has expired/);
  });

  it("tells a revoked admin key where admin keys come from, not to ask an administrator", async () => {
    const { key } = await insertKey({
      role: "admin",
      accountId: undefined,
      revokedAt: new Date(START - 1000),
    });
    const error = await rejection(authenticator().authenticate(`Bearer ${key}`));
    expect(error.code).toBe("invalid_api_key");
    expect(error.message).toBe(
      "This admin key has been revoked or has expired. Use another admin key, give the server a new admin_key (or TOLLGATE_ADMIN_KEY), or restart a server that takes no admin key any more: it makes one and prints it.",
    );
    // The same key configured as the admin key, and revoked in the store: the same advice.
    const configured = await rejection(
      authenticator({ configuredAdminKey: key }).authenticate(`Bearer ${key}`),
    );
    expect(configured.message).toBe(error.message);
  });

  it("tells a wrong secret for a revoked key only that it is incorrect", async () => {
    const { publicId } = await insertKey({ revokedAt: new Date(START - 1000) });
    const error = await rejection(authenticator().authenticate(`Bearer sk-tg-${publicId}-${"B".repeat(43)}`));
    expect(error.message).toMatch(/^Incorrect API key provided\./);
  });

  it("refuses a key from the instant it expires", async () => {
    const { key } = await insertKey({ expiresAt: new Date(START + 5000) });
    const auth = authenticator();
    await expect(auth.authenticate(`Bearer ${key}`)).resolves.toBeDefined();
    clock.time = START + 4999;
    await expect(auth.authenticate(`Bearer ${key}`)).resolves.toBeDefined();
    clock.time = START + 5000;
    const error = await rejection(auth.authenticate(`Bearer ${key}`));
    expect(error.message).toMatch(/revoked or has expired/);
  });
});

describe("the configured admin key", () => {
  it("is accepted as an admin key without account, in any format", async () => {
    const key = await authenticator({ configuredAdminKey: "operator-chosen-secret" }).authenticate(
      "Bearer operator-chosen-secret",
    );
    expect(key).toMatchObject({
      role: "admin",
      accountId: undefined,
      allowedModels: undefined,
      publicId: "admin",
    });
  });

  it("reports the public id of a configured key shaped like a Tollgate key", async () => {
    const configured = generateApiKey();
    const key = await authenticator({ configuredAdminKey: configured.key }).authenticate(
      `Bearer ${configured.key}`,
    );
    expect(key.publicId).toBe(configured.publicId);
    expect(key.role).toBe("admin");
  });

  it("does not accept a near miss", async () => {
    const auth = authenticator({ configuredAdminKey: "operator-chosen-secret" });
    for (const guess of ["operator-chosen-secreT", "operator-chosen-secret2", "operator"]) {
      const error = await rejection(auth.authenticate(`Bearer ${guess}`));
      expect(error.code).toBe("invalid_api_key");
    }
  });

  it("is refused once revoked or expired in the store, when it is a stored key too", async () => {
    const { key, publicId } = await insertKey({ role: "admin", accountId: undefined });
    const auth = authenticator({ configuredAdminKey: key });
    await expect(auth.authenticate(`Bearer ${key}`)).resolves.toMatchObject({ role: "admin", publicId });
    await store.revokeApiKey(publicId, new Date(START));
    clock.time += 1000;
    const error = await rejection(auth.authenticate(`Bearer ${key}`));
    expect(error.code).toBe("invalid_api_key");
    expect(error.message).toContain("revoked or has expired");

    const expiring = await insertKey({
      role: "admin",
      accountId: undefined,
      expiresAt: new Date(START + 5000),
    });
    const expires = authenticator({ configuredAdminKey: expiring.key });
    await expect(expires.authenticate(`Bearer ${expiring.key}`)).resolves.toMatchObject({ role: "admin" });
    clock.time = START + 5000;
    expect((await rejection(expires.authenticate(`Bearer ${expiring.key}`))).code).toBe("invalid_api_key");
  });

  it("is accepted when the store cannot answer, or holds another key under its public id", async () => {
    const { key, publicId } = await insertKey({ role: "admin", accountId: undefined });
    await store.revokeApiKey(publicId, new Date(START));
    const failing = {
      getApiKeyByPublicId: async () => {
        throw new Error("the store is down");
      },
    };
    const down = createAuthenticator({ store: failing, configuredAdminKey: key });
    await expect(down.authenticate(`Bearer ${key}`)).resolves.toMatchObject({ role: "admin" });
    // The same public id with another secret is another key: its revocation is not this one's.
    const impostor = `${key.slice(0, key.lastIndexOf("-") + 1)}${"x".repeat(key.length - key.lastIndexOf("-") - 1)}`;
    await expect(
      authenticator({ configuredAdminKey: impostor }).authenticate(`Bearer ${impostor}`),
    ).resolves.toMatchObject({ role: "admin", publicId });
  });

  it("leaves stored keys working", async () => {
    const { key } = await insertKey();
    await expect(
      authenticator({ configuredAdminKey: "operator-chosen-secret" }).authenticate(`Bearer ${key}`),
    ).resolves.toMatchObject({ role: "user" });
  });

  // Regression: the starter key pasted as admin_key made its holder, a customer, an administrator
  // (a credit of its own account was 201), while its chat requests got 403.
  it("stays a user's key, never an admin key, when it is a stored user key", async () => {
    const { key, publicId } = await insertKey();
    const auth = authenticator({ configuredAdminKey: key });
    await expect(auth.authenticate(`Bearer ${key}`)).resolves.toMatchObject({
      role: "user",
      accountId: ACCOUNT_ID,
      publicId,
    });
    await store.revokeApiKey(publicId, new Date(START));
    clock.time += 1000;
    expect((await rejection(auth.authenticate(`Bearer ${key}`))).message).toMatch(
      /^This API key has been revoked or has expired/,
    );
  });
});

describe("the cache", () => {
  it("asks the store once for many requests within a second", async () => {
    const { key } = await insertKey();
    const lookups = vi.spyOn(store, "getApiKeyByPublicId");
    const auth = authenticator();
    await Promise.all(Array.from({ length: 5 }, () => auth.authenticate(`Bearer ${key}`)));
    clock.time = START + 999;
    await auth.authenticate(`Bearer ${key}`);
    expect(lookups).toHaveBeenCalledTimes(1);
    clock.time = START + 1000;
    await auth.authenticate(`Bearer ${key}`);
    expect(lookups).toHaveBeenCalledTimes(2);
  });

  it("still checks the secret of a cached key", async () => {
    const { key, publicId } = await insertKey();
    const auth = authenticator();
    await auth.authenticate(`Bearer ${key}`);
    const error = await rejection(auth.authenticate(`Bearer sk-tg-${publicId}-${"B".repeat(43)}`));
    expect(error.message).toMatch(/^Incorrect API key provided\./);
  });

  it("refuses a key revoked elsewhere within 1 second", async () => {
    const { key, publicId } = await insertKey();
    const auth = authenticator();
    await auth.authenticate(`Bearer ${key}`);
    await store.revokeApiKey(publicId, new Date(clock.time));
    clock.time = START + 1000;
    const error = await rejection(auth.authenticate(`Bearer ${key}`));
    expect(error.message).toMatch(/revoked or has expired/);
  });

  it("sees a key created after an unknown lookup of its public id within 1 second", async () => {
    const auth = authenticator();
    const generated = generateApiKey();
    await rejection(auth.authenticate(`Bearer ${generated.key}`));
    await store.insertApiKey({
      id: crypto.randomUUID(),
      publicId: generated.publicId,
      accountId: ACCOUNT_ID,
      role: "user",
      name: "",
      secretHash: generated.secretHash,
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      expiresAt: undefined,
      revokedAt: undefined,
      createdAt: new Date(START),
    });
    clock.time = START + 1000;
    expect(await auth.authenticate(`Bearer ${generated.key}`)).toEqual({
      publicId: generated.publicId,
      accountId: ACCOUNT_ID,
      role: "user",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      name: "",
    });
  });

  it("forgets a key at once on request", async () => {
    const { key, publicId } = await insertKey();
    const auth = authenticator();
    await auth.authenticate(`Bearer ${key}`);
    await store.revokeApiKey(publicId, new Date(clock.time));
    auth.forget(publicId);
    await expect(auth.authenticate(`Bearer ${key}`)).rejects.toThrow(/revoked or has expired/);
  });

  it("works with vitest fake timers driving Date.now", async () => {
    vi.useFakeTimers({ now: START });
    try {
      const { key, publicId } = await insertKey();
      const auth = createAuthenticator({ store });
      await auth.authenticate(`Bearer ${key}`);
      await store.revokeApiKey(publicId, new Date());
      await expect(auth.authenticate(`Bearer ${key}`)).resolves.toBeDefined();
      vi.advanceTimersByTime(1000);
      await expect(auth.authenticate(`Bearer ${key}`)).rejects.toThrow(/revoked or has expired/);
    } finally {
      vi.useRealTimers();
    }
  });

  it("keeps a row no longer than its TTL when the wall clock steps back", async () => {
    const { key, publicId } = await insertKey();
    const steady = { time: 0 };
    const auth = createAuthenticator({ store, now: () => clock.time, steadyNow: () => steady.time });
    await auth.authenticate(`Bearer ${key}`);
    await store.revokeApiKey(publicId, new Date(clock.time));
    // NTP (or a resumed VM) sets the wall clock an hour back while a second passes.
    clock.time -= 3_600_000;
    steady.time += 1000;
    await expect(auth.authenticate(`Bearer ${key}`)).rejects.toThrow(/revoked or has expired/);
  });

  it("does not remember a failed lookup", async () => {
    const { key } = await insertKey();
    const auth = authenticator();
    const lookups = vi.spyOn(store, "getApiKeyByPublicId").mockRejectedValueOnce(new Error("store down"));
    await expect(auth.authenticate(`Bearer ${key}`)).rejects.toThrow("store down");
    await expect(auth.authenticate(`Bearer ${key}`)).resolves.toBeDefined();
    expect(lookups).toHaveBeenCalledTimes(2);
  });

  it("keeps at most cacheSize keys", async () => {
    const first = await insertKey();
    const second = await insertKey();
    const lookups = vi.spyOn(store, "getApiKeyByPublicId");
    const auth = createAuthenticator({ store, now: () => clock.time, cacheSize: 1 });
    await auth.authenticate(`Bearer ${first.key}`);
    await auth.authenticate(`Bearer ${second.key}`);
    await auth.authenticate(`Bearer ${first.key}`);
    expect(lookups).toHaveBeenCalledTimes(3);
  });
});

describe("isModelAllowedForKey", () => {
  const accountId = "account-1";

  it("allows every model when the key names none", () => {
    expect(isModelAllowedForKey({ accountId, allowedModels: undefined }, "anything")).toBe(true);
  });

  it("allows exactly the listed models", () => {
    const key = { accountId, allowedModels: ["qwen3-0.6b", "org/model:Q4"] };
    expect(isModelAllowedForKey(key, "org/model:Q4")).toBe(true);
    expect(isModelAllowedForKey(key, "qwen3")).toBe(false);
    expect(isModelAllowedForKey({ accountId, allowedModels: [] }, "qwen3-0.6b")).toBe(false);
  });

  it("allows a key of no account (an admin key) no model", () => {
    expect(isModelAllowedForKey({ accountId: undefined, allowedModels: undefined }, "anything")).toBe(false);
  });
});
