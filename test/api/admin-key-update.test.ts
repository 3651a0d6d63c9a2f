import type { FastifyInstance } from "fastify";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { createKey } from "../../src/admin/create-key.ts";
import { type Authenticator, createAuthenticator } from "../../src/auth/authenticator.ts";
import { openStore } from "../../src/store/open-store.ts";
import type { Store } from "../../src/store/store.ts";
import { makeTemporaryDirectory, newDatabaseUrl } from "../store/temporary-directory.ts";
import { buildAdminTestApp } from "./build-admin-test-app.ts";

const directory = makeTemporaryDirectory();
const NOW = new Date("2025-06-01T12:00:00.000Z");
const ACCOUNT_ID = "00000000-0000-4000-8000-000000000001";

let store: Store;
let app: FastifyInstance;
let authenticator: Authenticator;
let adminKey: string;
let adminPublicId: string;
let userKey: string;
let userPublicId: string;
/** The public ids the routes told the server to drop from its caches. */
const changed: string[] = [];

/** The admin app on this test's store, recording the keys it tells caches to drop. */
function buildAdminApp(): FastifyInstance {
  return buildAdminTestApp({
    authenticator,
    routes: {
      store,
      modelIds: () => ["m1", "m2", "gpt-4o-mini"],
      onKeyChanged: (publicId) => {
        changed.push(publicId);
        authenticator.forget(publicId);
      },
      now: () => NOW,
    },
  });
}

beforeEach(async () => {
  store = await openStore(newDatabaseUrl(directory));
  authenticator = createAuthenticator({ store, now: () => NOW.getTime() });
  const admin = await createKey(store, { role: "admin", accountId: undefined }, { now: () => NOW });
  adminKey = admin.key;
  adminPublicId = admin.record.publicId;
  await store.insertAccount({ id: ACCOUNT_ID, name: "staff", balanceNano: 0n, createdAt: NOW });
  const user = await createKey(
    store,
    { role: "user", accountId: ACCOUNT_ID, name: "ci", allowedModels: ["m1"], rpm: 1, tpm: 1000 },
    { now: () => NOW },
  );
  userKey = user.key;
  userPublicId = user.record.publicId;
  changed.length = 0;
  app = buildAdminApp();
});

afterEach(async () => {
  await app.close();
  await store.close();
});

async function call(method: "GET" | "PATCH" | "POST", url: string, body?: unknown, key = adminKey) {
  const response = await app.inject({
    method,
    url,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
  });
  return { status: response.statusCode, json: () => response.json() };
}

const patch = (body: unknown, publicId = userPublicId, key = adminKey) =>
  call("PATCH", `/admin/keys/${publicId}`, body, key);

describe("PATCH /admin/keys/:id", () => {
  it("changes every setting in place, answers the key as GET /admin/keys shows it, and drops it from caches", async () => {
    // The key's settings are in the authenticator's cache, as a server's would be.
    expect(await authenticator.authenticate(`Bearer ${userKey}`)).toMatchObject({ rpm: 1 });
    const response = await patch({
      name: "deploy",
      models: ["m2", "gpt-4o-mini"],
      rpm: 5,
      tpm: 20_000,
      expires_at: "2030-01-01T00:00:00Z",
    });
    expect(response.status).toBe(200);
    expect(response.json()).toEqual({
      public_id: userPublicId,
      account_id: ACCOUNT_ID,
      account: "staff",
      role: "user",
      name: "deploy",
      models: ["m2", "gpt-4o-mini"],
      rpm: 5,
      tpm: 20_000,
      expires_at: "2030-01-01T00:00:00.000Z",
      revoked_at: null,
      created_at: NOW.toISOString(),
    });
    const listed = (await call("GET", "/admin/keys?account=staff")).json().data;
    expect(listed).toEqual([response.json()]);
    expect(changed).toEqual([userPublicId]);
    // The same key, with the new settings at once: no wait for the cache's second.
    expect(await authenticator.authenticate(`Bearer ${userKey}`)).toMatchObject({
      publicId: userPublicId,
      name: "deploy",
      allowedModels: ["m2", "gpt-4o-mini"],
      rpm: 5,
      tpm: 20_000,
    });
  });

  it("keeps the fields it is not given, and clears those given as null", async () => {
    const kept = await patch({ rpm: 10 });
    expect(kept.status).toBe(200);
    expect(kept.json()).toMatchObject({ name: "ci", models: ["m1"], rpm: 10, tpm: 1000, expires_at: null });
    // A name of null clears it too, as the README has it (regression: 400 invalid_type).
    const cleared = await patch({ models: null, rpm: null, tpm: null, expires_at: null, name: null });
    expect(cleared.status).toBe(200);
    expect(cleared.json()).toMatchObject({ name: "", models: null, rpm: null, tpm: null, expires_at: null });
    expect(await store.getApiKeyByPublicId(userPublicId)).toMatchObject({
      name: "",
      allowedModels: undefined,
      rpm: undefined,
      tpm: undefined,
      expiresAt: undefined,
    });
  });

  it("changes an admin key's name and expiry, refuses models and limits, and its own expiry", async () => {
    const other = await createKey(store, { role: "admin", accountId: undefined }, { now: () => NOW });
    const renamed = await patch({ name: "ops", expires_at: "2030-01-01" }, other.record.publicId);
    expect(renamed.status).toBe(200);
    expect(renamed.json()).toMatchObject({
      role: "admin",
      account: null,
      name: "ops",
      expires_at: "2030-01-01T00:00:00.000Z",
    });
    // Itself: its name, but no expiry that would lock its holder out, and none taken away
    // (regression: a key made to expire made itself permanent).
    expect((await patch({ name: "me" }, adminPublicId)).status).toBe(200);
    for (const expires_at of ["2030-01-01", null]) {
      const ownExpiry = await patch({ expires_at }, adminPublicId);
      expect(ownExpiry.status).toBe(400);
      expect(ownExpiry.json().error).toMatchObject({ code: "invalid_value", param: "expires_at" });
      expect(ownExpiry.json().error.message).toMatch(/cannot change its own expiry over the API/);
    }
    expect((await store.getApiKeyByPublicId(adminPublicId))?.expiresAt).toBeUndefined();
    const temporary = await createKey(
      store,
      { role: "admin", accountId: undefined, expiresAt: new Date("2031-01-01T00:00:00Z") },
      { now: () => NOW },
    );
    const ownRemoval = await patch({ expires_at: null }, temporary.record.publicId, temporary.key);
    expect(ownRemoval.status).toBe(400);
    expect((await store.getApiKeyByPublicId(temporary.record.publicId))?.expiresAt).toEqual(
      new Date("2031-01-01T00:00:00Z"),
    );
    const refused = await patch({ rpm: 5 }, adminPublicId);
    expect(refused.status).toBe(400);
    expect(refused.json().error).toMatchObject({
      code: "invalid_value",
      param: "rpm",
      message: `Key ${adminPublicId} is an admin key: it has no account, models or rate limits, so only its name and expiry can be changed.`,
    });
    expect((await patch({ models: ["m1"] }, adminPublicId)).json().error.param).toBe("models");
    expect((await store.getApiKeyByPublicId(adminPublicId))?.rpm).toBeUndefined();
  });

  it("refuses a revoked key with 400 invalid_value naming the id, and changes nothing", async () => {
    expect((await call("POST", `/admin/keys/${userPublicId}/revoke`)).status).toBe(200);
    changed.length = 0;
    const response = await patch({ rpm: 1000 });
    expect(response.status).toBe(400);
    expect(response.json().error).toEqual({
      message: `Key ${userPublicId} was revoked at 2025-06-01T12:00:00Z, and a revoked key cannot be changed: make a new key instead.`,
      type: "invalid_request_error",
      param: "id",
      code: "invalid_value",
    });
    expect((await store.getApiKeyByPublicId(userPublicId))?.rpm).toBe(1);
    expect(changed).toEqual([]);
  });

  it("answers 404 not_found for an unknown key, and 400 for an id that is not a public id", async () => {
    const unknown = await patch({ rpm: 5 }, "zzzzzzzzzzzz");
    expect(unknown.status).toBe(404);
    expect(unknown.json().error).toMatchObject({
      code: "not_found",
      param: "id",
      message: "No key has the public id zzzzzzzzzzzz.",
    });
    const whole = await patch({ rpm: 5 }, userKey);
    expect(whole.status).toBe(400);
    expect(whole.json().error).toMatchObject({ code: "invalid_value", param: "id" });
    expect(JSON.stringify(whole.json())).not.toContain(userKey);
  });

  it.each([
    ["an rpm of 0", { rpm: 0 }, "invalid_value", "rpm"],
    ["an rpm as a string", { rpm: "5" }, "invalid_type", "rpm"],
    ["a fractional tpm", { tpm: 1.5 }, "invalid_type", "tpm"],
    ["an rpm too large to be exact", { rpm: 2 ** 53 + 2 }, "invalid_value", "rpm"],
    ["an empty model list", { models: [] }, "invalid_value", "models"],
    ["a model not in the catalogue", { models: ["m3"] }, "invalid_value", "models"],
    ["an expiry that is no date", { expires_at: "soon" }, "invalid_value", "expires_at"],
    ["an expiry in the past", { expires_at: "2020-01-01" }, "invalid_value", "expires_at"],
    ["a name with a line break", { name: "a\nb" }, "invalid_value", "name"],
    ["a name with a NUL", { name: "a\u0000b" }, "invalid_value", "name"],
    ["a name too long", { name: "x".repeat(101) }, "invalid_value", "name"],
    ["an unknown field", { rmp: 5 }, "invalid_value", "rmp"],
    ["a body with no field", {}, "invalid_value", null],
    ["a body that is no object", [1], "invalid_type", null],
  ])("refuses %s with 400 in the contract's shape, and changes nothing", async (_case, body, code, param) => {
    const before = await store.getApiKeyByPublicId(userPublicId);
    const response = await patch(body);
    expect(response.status).toBe(400);
    const error = response.json().error;
    expect(error).toMatchObject({ code, type: "invalid_request_error" });
    expect(error.param ?? null).toBe(param);
    expect(typeof error.message).toBe("string");
    expect(await store.getApiKeyByPublicId(userPublicId)).toEqual(before);
    expect(changed).toEqual([]);
  });

  it("names the field meant and the catalogue's model meant", async () => {
    expect((await patch({ rmp: 5 })).json().error.message).toBe(
      "Unknown field 'rmp'. Did you mean 'rpm'? The fields are: name, models, rpm, tpm, expires_at.",
    );
    expect((await patch({ models: ["gpt-4o-mni"] })).json().error.message).toBe(
      "No model 'gpt-4o-mni' in the catalogue. Did you mean 'gpt-4o-mini'?",
    );
    expect((await patch({})).json().error.message).toBe(
      "Nothing to change: give at least one of name, models, rpm, tpm, expires_at.",
    );
  });

  it("answers a user key 403 admin_key_required, before looking at the body", async () => {
    const response = await patch({ rpm: 1_000_000 }, userPublicId, userKey);
    expect(response.status).toBe(403);
    expect(response.json().error.code).toBe("admin_key_required");
    expect((await store.getApiKeyByPublicId(userPublicId))?.rpm).toBe(1);
  });
});
