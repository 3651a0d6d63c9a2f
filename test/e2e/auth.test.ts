import { beforeAll, describe, expect, it } from "vitest";
import { EMBEDDING_MODEL, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const server = useTestServer();
let revokedKey: string;
let expiredKey: string;
let restrictedKey: string;

beforeAll(async () => {
  revokedKey = await server().createKey({ name: "revoked" });
  const publicId = revokedKey.split("-")[2]!;
  await server().store.revokeApiKey(publicId, new Date());
  const past = new Date(Date.now() - 60_000);
  expiredKey = await server().createKey(
    { name: "expired", expiresAt: new Date(past.getTime() + 1000) },
    () => past,
  );
  restrictedKey = await server().createKey({ name: "embed only", allowedModels: [EMBEDDING_MODEL] });
});

const endpoints = [
  ["GET", "/v1/models"],
  ["GET", `/v1/models/${TINY_MODEL}`],
  ["GET", "/v1/models/no-such-model"],
  ["POST", "/v1/chat/completions"],
] as const;

async function call(method: string, path: string, authorization: string | undefined) {
  const response = await fetch(`${server().origin}${path}`, {
    method,
    headers: {
      ...(authorization === undefined ? {} : { authorization }),
      ...(method === "POST" ? { "content-type": "application/json" } : {}),
    },
    ...(method === "POST"
      ? {
          body: JSON.stringify({
            model: TINY_MODEL,
            messages: [{ role: "user", content: "Hi" }],
            max_tokens: 1,
          }),
        }
      : {}),
  });
  return { status: response.status, body: (await response.json()) as { error?: Record<string, unknown> } };
}

describe("authentication", () => {
  const badKeys: [string, () => string | undefined][] = [
    ["missing", () => undefined],
    ["not Bearer", () => `Basic ${server().starterKey}`],
    ["malformed", () => "Bearer not-a-key"],
    ["unknown", () => "Bearer sk-tg-aaaaaaaaaaaa-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"],
    ["wrong secret", () => `Bearer ${server().starterKey.slice(0, -4)}XXXX`],
    ["revoked", () => `Bearer ${revokedKey}`],
    ["expired", () => `Bearer ${expiredKey}`],
  ];

  for (const [name, header] of badKeys) {
    it(`answers a ${name} key with 401 invalid_api_key on every endpoint`, async () => {
      for (const [method, path] of endpoints) {
        const response = await call(method, path, header());
        expect(response.status, `${method} ${path}`).toBe(401);
        expect(response.body.error).toMatchObject({
          code: "invalid_api_key",
          type: "invalid_request_error",
          param: null,
        });
        // The message may show the key format, but never echoes the key it was given.
        const token = header()?.split(" ")[1];
        if (token !== undefined) expect(String(response.body.error?.message)).not.toContain(token.slice(-16));
      }
    });
  }

  it("needs no key for /health", async () => {
    const response = await fetch(`${server().origin}/health`);
    expect(response.status).toBe(200);
  });
});

describe("model permissions", () => {
  it("lists only the models a key may use", async () => {
    const all = await call("GET", "/v1/models", `Bearer ${server().starterKey}`);
    const restricted = await call("GET", "/v1/models", `Bearer ${restrictedKey}`);
    const ids = (body: unknown) => (body as { data: { id: string }[] }).data.map((model) => model.id);
    expect(ids(all.body)).toEqual([TINY_MODEL, EMBEDDING_MODEL]);
    expect(ids(restricted.body)).toEqual([EMBEDDING_MODEL]);
  });

  it("answers a model the key may not use as not found on retrieve", async () => {
    const response = await call("GET", `/v1/models/${TINY_MODEL}`, `Bearer ${restrictedKey}`);
    expect(response.status).toBe(404);
    expect(response.body.error).toMatchObject({ code: "model_not_found" });
  });

  it("refuses chat with a model the key may not use with 403 model_not_allowed", async () => {
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${restrictedKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Hi" }] }),
    });
    expect(response.status).toBe(403);
    expect(response.headers.get("x-should-retry")).toBe("false");
    const body = (await response.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({ code: "model_not_allowed", type: "permission_error", param: "model" });
  });

  it("lets an admin key use no model: none listed or shown, and chat refused before the kind or the context", async () => {
    const admin = `Bearer ${server().adminKey}`;
    expect((await call("GET", "/v1/models", admin)).body).toEqual({ object: "list", data: [] });
    expect((await call("GET", `/v1/models/${TINY_MODEL}`, admin)).status).toBe(404);
    const chat = async (body: Record<string, unknown>) => {
      const response = await fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: admin, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      return {
        status: response.status,
        error: ((await response.json()) as { error: { code: string } }).error,
      };
    };
    // SPEC section 11: the key's model permission (403) before the kind (400) and the context (400).
    for (const body of [
      { model: EMBEDDING_MODEL, messages: [{ role: "user", content: "Hi" }] },
      { model: TINY_MODEL, messages: [{ role: "user", content: "word ".repeat(5000) }] },
    ]) {
      expect(await chat(body)).toMatchObject({ status: 403, error: { code: "model_not_allowed" } });
    }
    // A model that does not exist is still not found (404 comes before 403).
    expect(await chat({ model: "no-such-model", messages: [{ role: "user", content: "Hi" }] })).toMatchObject(
      {
        status: 404,
      },
    );
  });
});
