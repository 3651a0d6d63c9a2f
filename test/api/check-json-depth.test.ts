import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/api/build-app.ts";
import { exceedsJsonDepth, MAX_JSON_DEPTH } from "../../src/api/check-json-depth.ts";
import { AppError } from "../../src/errors/app-error.ts";
import { ModelRegistry } from "../../src/models/model-registry.ts";

const nested = (depth: number, open = "[", close = "]") => `${open.repeat(depth)}${close.repeat(depth)}`;

describe("exceedsJsonDepth", () => {
  it("counts arrays and objects, not brackets inside strings", () => {
    expect(exceedsJsonDepth(nested(128))).toBe(false);
    expect(exceedsJsonDepth(nested(129))).toBe(true);
    expect(exceedsJsonDepth(`{"a":${nested(127)}}`)).toBe(false);
    expect(exceedsJsonDepth(`{"a":${nested(128)}}`)).toBe(true);
    // Brackets in strings, escaped quotes and backslashes included, are text.
    expect(exceedsJsonDepth(`{"a":"${"[".repeat(500)}\\"${"{".repeat(500)}\\\\"}`)).toBe(false);
    expect(exceedsJsonDepth(`["\\\\",${nested(200)}]`)).toBe(true);
    expect(exceedsJsonDepth('{"model":"m","messages":[{"role":"user","content":"hi"}]}', 3)).toBe(false);
    expect(exceedsJsonDepth('{"model":"m","messages":[{"role":"user","content":"hi"}]}', 2)).toBe(true);
  });
});

describe("a request body nested too deep", () => {
  let app: ReturnType<typeof buildApp>;
  let origin: string;
  beforeAll(async () => {
    app = buildApp({
      registry: new ModelRegistry([], () => undefined),
      authenticate: async (authorization) => {
        if (authorization !== "Bearer good") throw new AppError("invalid_api_key", "Not a key.");
        return {
          publicId: "good",
          accountId: undefined,
          role: "user",
          allowedModels: [],
          rpm: undefined,
          tpm: undefined,
        };
      },
    });
    origin = await app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("is refused with 400 invalid_json before it is parsed, in fields the server would ignore too", async () => {
    // Four million levels of brackets, under the size limit: parsed, it held 225 MB for seconds.
    const body = `{"model":"m","messages":[{"role":"user","content":"hi"}],"x":${nested(2_000_000)}}`;
    const refused = await fetch(`${origin}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer good" },
      body,
    });
    expect(refused.status).toBe(400);
    expect(await refused.json()).toEqual({
      error: {
        message: `The request body nests arrays and objects more than ${MAX_JSON_DEPTH} levels deep; no request needs that.`,
        type: "invalid_request_error",
        param: null,
        code: "invalid_json",
      },
    });
    // The key is still checked first (SPEC section 11).
    const anonymous = await fetch(`${origin}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body,
    });
    expect(anonymous.status).toBe(401);
  });
});
