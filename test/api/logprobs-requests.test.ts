import { describe, expect, it } from "vitest";
import { EMBEDDING_MODEL, postTinyChat, readError, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/**
 * `logprobs` and `top_logprobs` as requests send them: checked as fields (400 before anything
 * about the model), and refused for a local model, which cannot give them, in SPEC section 11's
 * place for what a model cannot do (after its 404 and 403 and its kind, before the rate limits).
 */

const server = useTestServer();

const errorOf = readError;

function postWith(key: string, body: Record<string, unknown>): Promise<Response> {
  return postTinyChat(server(), body, 4, key);
}

describe("logprobs fields", () => {
  it("refuses top_logprobs without logprobs: true, as OpenAI does", async () => {
    for (const logprobs of [undefined, false, null]) {
      expect(await errorOf(await postTinyChat(server(), { logprobs, top_logprobs: 3 }))).toEqual({
        status: 400,
        error: {
          message: "'top_logprobs' is only allowed when 'logprobs' is true.",
          type: "invalid_request_error",
          param: "top_logprobs",
          code: "invalid_value",
        },
      });
    }
  });

  it("refuses top_logprobs out of 0..20 or not whole, and logprobs that is no boolean", async () => {
    for (const [body, param, code] of [
      [{ logprobs: true, top_logprobs: 21 }, "top_logprobs", "invalid_value"],
      [{ logprobs: true, top_logprobs: -1 }, "top_logprobs", "invalid_value"],
      [{ logprobs: true, top_logprobs: 1.5 }, "top_logprobs", "invalid_type"],
      [{ logprobs: "yes" }, "logprobs", "invalid_type"],
    ] as const) {
      const { status, error } = await errorOf(await postTinyChat(server(), body));
      expect({ status, param: error.param, code: error.code }).toEqual({ status: 400, param, code });
    }
  });
});

describe("logprobs on a local model", () => {
  const refusal = {
    status: 400,
    error: {
      message: `The model '${TINY_MODEL}' does not give log probabilities: local models cannot. Leave out 'logprobs' and 'top_logprobs', or use an upstream model.`,
      type: "invalid_request_error",
      param: "logprobs",
      code: "invalid_value",
    },
  };

  it("is refused with 400, with or without top_logprobs", async () => {
    expect(await errorOf(await postTinyChat(server(), { logprobs: true }))).toEqual(refusal);
    expect(
      await errorOf(await postTinyChat(server(), { logprobs: true, top_logprobs: 0, stream: true })),
    ).toEqual(refusal);
  });

  it("answers as before with logprobs false or absent: logprobs null", async () => {
    for (const asked of [{}, { logprobs: false }]) {
      const response = await postTinyChat(server(), { ...asked, temperature: 0 });
      expect(response.status).toBe(200);
      const body = (await response.json()) as { choices: { logprobs: unknown }[] };
      expect(body.choices[0]?.logprobs).toBeNull();
    }
  });

  it("comes after the key (401), the model (404), the key's permission (403) and its kind (400)", async () => {
    const ask = { logprobs: true };
    expect((await postWith("sk-tg-not-a-key", ask)).status).toBe(401);
    expect(
      (await errorOf(await postWith(server().starterKey, { ...ask, model: "no-such-model" }))).error.code,
    ).toBe("model_not_found");
    const otherKey = await server().createKey({ allowedModels: [EMBEDDING_MODEL] });
    expect((await errorOf(await postWith(otherKey, ask))).error.code).toBe("model_not_allowed");
    expect((await errorOf(await postWith(otherKey, { ...ask, model: EMBEDDING_MODEL }))).error.code).toBe(
      "model_not_supported",
    );
  });

  it("comes before the rate limits (429) and takes none of them", async () => {
    const limited = await server().createKey({ rpm: 1 });
    expect(await errorOf(await postWith(limited, { logprobs: true }))).toEqual(refusal);
    expect((await postWith(limited, {})).status).toBe(200);
    expect((await postWith(limited, {})).status).toBe(429);
  });
});
