import { describe, expect, it } from "vitest";
import { ENDLESS_MODEL, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

// SPEC section 11: key (401), body and fields (400), model (404), the key's model permission (403),
// the model's kind (400), rate limits (429), context length (400), balance (403), the queue (503).
// Each request here fails two checks at once and must get the earlier one's answer.

const server = useTestServer({ withEndlessModel: true });

const hello = [{ role: "user", content: "Hi" }];
/** Far more than the tiny model's 1024-token context. */
const overContext = [{ role: "user", content: "word ".repeat(5000) }];

async function chat(key: string, body: Record<string, unknown>) {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: TINY_MODEL, messages: hello, max_tokens: 1, ...body }),
  });
  const { error } = (await response.json()) as { error: { code: string; param: string | null } };
  return { status: response.status, code: error.code, param: error.param };
}

/** Opens a stream on the endless model (one sequence, no queue) and holds it until aborted. */
async function holdEndlessModel(signal: AbortSignal): Promise<void> {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ model: ENDLESS_MODEL, messages: hello, stream: true }),
    signal,
  });
  expect(response.status).toBe(200);
  await response.body!.getReader().read();
}

describe("order of checks (SPEC section 11)", () => {
  it("answers a bad field before an unknown model: 400 naming the field, not 404", async () => {
    expect(await chat(server().starterKey, { model: "no-such-model", temperature: 5 })).toEqual({
      status: 400,
      code: "invalid_value",
      param: "temperature",
    });
  });

  it("answers an unknown model before a key's allowed models: 404, not 403", async () => {
    const { key } = await server().createFundedKey("tiny-only", "1", { allowedModels: [TINY_MODEL] });
    expect(await chat(key, { model: "no-such-model" })).toEqual({
      status: 404,
      code: "model_not_found",
      param: "model",
    });
  });

  it("answers an unknown model before the request rate, and the request rate before the context length", async () => {
    const { key } = await server().createFundedKey("rpm-spent", "0", { rpm: 1 });
    // Refused for its balance, it still spends the key's one request.
    expect(await chat(key, {})).toMatchObject({ status: 403, code: "insufficient_balance" });
    expect(await chat(key, { model: "no-such-model" })).toEqual({
      status: 404,
      code: "model_not_found",
      param: "model",
    });
    expect(await chat(key, { messages: overContext })).toEqual({
      status: 429,
      code: "rate_limit_exceeded",
      param: null,
    });
  });

  it("answers a prompt longer than the context before an empty balance: 400, not 403", async () => {
    const { key } = await server().createFundedKey("empty-long-prompt", "0");
    expect(await chat(key, { messages: overContext })).toEqual({
      status: 400,
      code: "context_length_exceeded",
      param: "messages",
    });
  });

  it("answers an empty balance before a full queue: 403, not 503", async () => {
    const { key } = await server().createFundedKey("empty-full-queue", "0");
    const holder = new AbortController();
    try {
      await holdEndlessModel(holder.signal);
      // The queue is full indeed: a funded request is turned away.
      expect(await chat(server().starterKey, { model: ENDLESS_MODEL })).toMatchObject({
        status: 503,
        code: "model_overloaded",
      });
      expect(await chat(key, { model: ENDLESS_MODEL })).toEqual({
        status: 403,
        code: "insufficient_balance",
        param: null,
      });
    } finally {
      holder.abort();
    }
  });
});
