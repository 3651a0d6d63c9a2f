import { describe, expect, it } from "vitest";
import { EMBEDDING_MODEL, postTinyChat, readError, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/**
 * OpenAI's upstream-only fields (`logit_bias`, `service_tier`, `metadata`, `prediction`, ...) and
 * the legacy `functions` as requests send them: checked for shape as fields (400 before anything
 * about the model; so are what no model is given: `modalities` other than text, a costlier
 * `service_tier`, `store: true`); on a local model, `logit_bias` and `prediction` refused in
 * SPEC section 11's place for what a model cannot do (after its 404, 403 and kind, before the
 * rate limits), as `logprobs` is; the others accepted and ignored.
 */

const server = useTestServer();

const errorOf = readError;

function postWith(key: string, body: Record<string, unknown>): Promise<Response> {
  return postTinyChat(server(), body, 4, key);
}

/** An object of `count` entries, `entry(index)` each. */
function entries(count: number, entry: (index: number) => [string, unknown]): Record<string, unknown> {
  return Object.fromEntries(Array.from({ length: count }, (_, index) => entry(index)));
}

describe("upstream-only fields with a bad shape", () => {
  const cases: [Record<string, unknown>, string, string][] = [
    [{ logit_bias: "50256:-100" }, "logit_bias", "invalid_type"],
    [{ logit_bias: [1, 2] }, "logit_bias", "invalid_type"],
    [{ logit_bias: { "50256": 101 } }, "logit_bias[50256]", "invalid_value"],
    [{ logit_bias: { "50256": "-100" } }, "logit_bias[50256]", "invalid_type"],
    [{ logit_bias: { hello: 1 } }, "logit_bias", "invalid_value"],
    [{ logit_bias: { "-1": 1 } }, "logit_bias", "invalid_value"],
    [{ logit_bias: { "1.5": 1 } }, "logit_bias", "invalid_value"],
    [{ logit_bias: entries(301, (index) => [String(index), 1]) }, "logit_bias", "invalid_value"],
    [{ service_tier: 1 }, "service_tier", "invalid_type"],
    [{ service_tier: "" }, "service_tier", "invalid_value"],
    [{ service_tier: "f".repeat(65) }, "service_tier", "invalid_value"],
    [{ prompt_cache_key: "k".repeat(1025) }, "prompt_cache_key", "invalid_value"],
    [{ safety_identifier: { id: 1 } }, "safety_identifier", "invalid_type"],
    [{ safety_identifier: "s".repeat(257) }, "safety_identifier", "invalid_value"],
    [{ verbosity: "v".repeat(33) }, "verbosity", "invalid_value"],
    [{ store: "yes" }, "store", "invalid_type"],
    // Not passed on: the operator's upstream account would pay more, or keep the conversation.
    [{ service_tier: "priority" }, "service_tier", "invalid_value"],
    [{ service_tier: "scale" }, "service_tier", "invalid_value"],
    [{ store: true }, "store", "invalid_value"],
    // Tollgate answers with text only: an upstream's audio would be dropped, yet billed.
    [{ modalities: ["text", "audio"] }, "modalities", "invalid_value"],
    [{ modalities: ["audio"] }, "modalities", "invalid_value"],
    [{ modalities: [] }, "modalities", "invalid_value"],
    [{ metadata: "team=search" }, "metadata", "invalid_type"],
    [{ metadata: { count: 3 } }, "metadata.count", "invalid_type"],
    [{ metadata: { note: "n".repeat(513) } }, "metadata.note", "invalid_value"],
    [{ metadata: { ["k".repeat(65)]: "v" } }, "metadata", "invalid_value"],
    [{ metadata: entries(17, (index) => [`key${index}`, "v"]) }, "metadata", "invalid_value"],
    [{ prediction: "def add(a, b)" }, "prediction", "invalid_type"],
    [{ prediction: { type: "text", content: "x" } }, "prediction.type", "invalid_value"],
    [{ prediction: { type: "content" } }, "prediction.content", "missing_required_parameter"],
    [{ prediction: { type: "content", content: 5 } }, "prediction.content", "invalid_type"],
    [
      { prediction: { type: "content", content: [{ type: "text" }] } },
      "prediction.content[0].text",
      "missing_required_parameter",
    ],
    [{ modalities: "text" }, "modalities", "invalid_type"],
    [{ modalities: [1] }, "modalities[0]", "invalid_type"],
    [{ modalities: Array.from({ length: 9 }, () => "text") }, "modalities", "array_above_max_length"],
  ];

  it("are refused with 400 naming the field, in the contract's error shape", async () => {
    for (const [body, param, code] of cases) {
      const { status, error } = await errorOf(await postTinyChat(server(), body));
      expect({ body, status, param: error.param, code: error.code, type: error.type }).toEqual({
        body,
        status: 400,
        param,
        code,
        type: "invalid_request_error",
      });
      expect(typeof error.message).toBe("string");
    }
  });

  it("come after the key (401) and before the model (404)", async () => {
    const bad = { logit_bias: { hello: 1 }, model: "no-such-model" };
    expect((await postWith("sk-tg-not-a-key", bad)).status).toBe(401);
    expect(await errorOf(await postWith(server().starterKey, bad))).toMatchObject({
      status: 400,
      error: { param: "logit_bias", code: "invalid_value" },
    });
  });

  it("say why modalities other than text are refused", async () => {
    expect(await errorOf(await postTinyChat(server(), { modalities: ["text", "audio"] }))).toEqual({
      status: 400,
      error: {
        message:
          'Invalid value for \'modalities\': Tollgate answers with text only, not ["text","audio"] (an upstream model\'s audio would be dropped, yet billed); set it to ["text"] or leave it out.',
        type: "invalid_request_error",
        param: "modalities",
        code: "invalid_value",
      },
    });
  });

  it("name the key that is no token id", async () => {
    const { error } = await errorOf(await postTinyChat(server(), { logit_bias: { "50256": 1, hello: 1 } }));
    expect(error.message).toContain("'hello'");
  });
});

describe("legacy functions and function_call", () => {
  it("are refused with 400 saying to send tools, whatever the model", async () => {
    const weather = { name: "get_weather", parameters: { type: "object", properties: {} } };
    for (const model of [TINY_MODEL, "no-such-model"]) {
      const { status, error } = await errorOf(
        await postTinyChat(server(), { model, functions: [weather], function_call: "auto" }),
      );
      expect(status).toBe(400);
      expect(error).toMatchObject({
        param: "functions",
        code: "invalid_value",
        type: "invalid_request_error",
      });
      expect(error.message).toContain("'tools'");
      expect(error.message).toContain("'tool_choice'");
    }
    expect((await errorOf(await postTinyChat(server(), { function_call: "none" }))).error.param).toBe(
      "function_call",
    );
    expect((await postWith("sk-tg-not-a-key", { functions: [weather] })).status).toBe(401);
  });
});

describe("upstream-only fields on a local model", () => {
  const refusal = (param: string, message: string) => ({
    status: 400,
    error: { message, type: "invalid_request_error", param, code: "invalid_value" },
  });
  const LOGIT_BIAS = refusal(
    "logit_bias",
    `The model '${TINY_MODEL}' does not apply 'logit_bias': local models do not apply logit_bias (its keys are token ids of another tokenizer). Leave it out, or use an upstream model.`,
  );

  it("refuses logit_bias and prediction with 400", async () => {
    expect(await errorOf(await postTinyChat(server(), { logit_bias: { "50256": -100 } }))).toEqual(
      LOGIT_BIAS,
    );
    expect(
      await errorOf(await postTinyChat(server(), { logit_bias: { "1": 0, "2": 5 }, stream: true })),
    ).toEqual(LOGIT_BIAS);
    expect(
      await errorOf(await postTinyChat(server(), { prediction: { type: "content", content: "Go." } })),
    ).toEqual(
      refusal(
        "prediction",
        `The model '${TINY_MODEL}' does not take predicted outputs: local models do not apply 'prediction'. Leave it out, or use an upstream model.`,
      ),
    );
  });

  it("accepts and ignores the fields that change nothing it generates, and modalities text", async () => {
    const ignored = {
      service_tier: "flex",
      prompt_cache_key: "k",
      safety_identifier: "s",
      verbosity: "low",
      store: false,
      metadata: { a: "b" },
      modalities: ["text"],
      logit_bias: null,
      prediction: null,
      functions: null,
      function_call: null,
    };
    const plain = (await (await postTinyChat(server(), { temperature: 0, seed: 7 })).json()) as {
      choices: { message: unknown }[];
    };
    const response = await postTinyChat(server(), { ...ignored, temperature: 0, seed: 7 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: { message: unknown }[] };
    expect(body.choices[0]?.message).toEqual(plain.choices[0]?.message);
    // A logit_bias that changes nothing (none, or biases of 0) is taken (regression: refused).
    for (const logit_bias of [{}, { "50256": 0 }]) {
      const biased = await postTinyChat(server(), { logit_bias, temperature: 0, seed: 7 });
      expect(biased.status).toBe(200);
      const biasedBody = (await biased.json()) as { choices: { message: unknown }[] };
      expect(biasedBody.choices[0]?.message).toEqual(plain.choices[0]?.message);
    }
  });

  it("refuses after the key (401), the model (404), the key's permission (403) and its kind (400)", async () => {
    const ask = { logit_bias: { "50256": -100 } };
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

  it("refuses before the rate limits (429) and takes none of them", async () => {
    const limited = await server().createKey({ rpm: 1 });
    expect(await errorOf(await postWith(limited, { logit_bias: { "1": 1 } }))).toEqual(LOGIT_BIAS);
    expect((await postWith(limited, {})).status).toBe(200);
    expect((await postWith(limited, {})).status).toBe(429);
  });
});
