import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { getTestModelPath } from "../support/test-model.ts";
import { createTinyModelEntry, ENDLESS_MODEL, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/** The tiny model at prices whose costs fall between nano-units. */
const ODD_PRICED_MODEL = "tiny-odd-priced";
const ODD_PRICES = { inputPerMillion: "0.123456789", outputPerMillion: "0.987654321" };

const server = useTestServer(async () => ({
  withEndlessModel: true,
  extraModels: [
    {
      ...createTinyModelEntry(await getTestModelPath()),
      id: ODD_PRICED_MODEL,
      pricing: { kind: "chat", ...ODD_PRICES },
    },
  ],
}));

/** The tiny model's prices, "0.10" and "0.40" per million tokens, in nano-units per token. */
function expectedCost(promptTokens: number, completionTokens: number): bigint {
  if (completionTokens === 0) return 0n;
  return BigInt(promptTokens) * 100n + BigInt(completionTokens) * 400n;
}

const messages = [{ role: "user" as const, content: "Tell me about billing." }];
const ONE = 1_000_000_000n;

/** A decimal price such as "0.123456789" in nano-units. */
function toNano(price: string): bigint {
  const [whole = "0", fraction = ""] = price.split(".");
  return BigInt(whole) * ONE + BigInt(fraction.padEnd(9, "0"));
}

/** A reset header as OpenAI writes it (`20ms`, `30s`, `1m0s`, never `60s`) in milliseconds. */
function parseReset(text: string | null): number {
  const match = /^(?:(\d+)ms|(?:(\d+)m)?(\d+)s)$/.exec(text ?? "");
  const [, milliseconds, minutes, seconds = "0"] = match ?? [];
  if (match === null || Number(seconds) >= 60) throw new Error(`not a reset as OpenAI writes it: ${text}`);
  if (milliseconds !== undefined) return Number(milliseconds);
  return (Number(minutes ?? "0") * 60 + Number(seconds)) * 1000;
}

async function waitForUsage(accountId: string, count: number) {
  for (let attempt = 0; attempt < 100; attempt++) {
    const rows = await server().store.listUsage({ accountId });
    if (rows.length >= count) return rows;
    await sleep(50);
  }
  throw new Error("usage row never appeared");
}

describe("exact charges", () => {
  it("charges a non-streamed request its exact cost and writes the usage row before answering", async () => {
    const { accountId, key, publicId } = await server().createFundedKey("exact-plain", "1");
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        "x-request-id": "bill-1",
      },
      body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 8, user: "end-user-7" }),
    });
    const body = (await response.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
    // The row exists by the time the response is read: no waiting.
    const [row, ...others] = await server().store.listUsage({ accountId });
    expect(others).toEqual([]);
    const cost = expectedCost(body.usage.prompt_tokens, body.usage.completion_tokens);
    expect(row).toMatchObject({
      requestId: "bill-1",
      accountId,
      keyPublicId: publicId,
      model: TINY_MODEL,
      promptTokens: body.usage.prompt_tokens,
      completionTokens: body.usage.completion_tokens,
      costNano: cost,
      user: "end-user-7",
      errorCode: undefined,
      estimated: false,
    });
    expect(["stop", "length"]).toContain(row?.finishReason);
    // Timings: the wait in the model's queue, and from admission to the first token and the end.
    expect(row?.queueMs).toBeGreaterThanOrEqual(0);
    expect(row?.firstTokenMs).toBeGreaterThanOrEqual(row?.queueMs ?? 0);
    expect(row?.totalMs).toBeGreaterThanOrEqual(row?.firstTokenMs ?? 0);
    expect(await server().store.getAccountMoney(accountId)).toEqual({
      balanceNano: ONE - cost,
      reservedNano: 0n,
      spentNano: cost,
    });
  });

  it("charges a streamed request the tokens it generated", async () => {
    const { accountId, key } = await server().createFundedKey("exact-stream", "1");
    const client = new OpenAI({ baseURL: server().baseUrl, apiKey: key, maxRetries: 0 });
    let usage: OpenAI.CompletionUsage | undefined | null;
    for await (const chunk of await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      max_tokens: 10,
      stream: true,
      stream_options: { include_usage: true },
    })) {
      usage = chunk.usage ?? usage;
    }
    const [row] = await server().store.listUsage({ accountId });
    expect(row?.completionTokens).toBe(usage?.completion_tokens);
    expect(row?.costNano).toBe(expectedCost(usage!.prompt_tokens, usage!.completion_tokens));
    expect((await server().store.getAccountMoney(accountId))?.reservedNano).toBe(0n);
  });

  it("rounds a cost that falls between nano-units up, once per request", async () => {
    const { accountId, key } = await server().createFundedKey("exact-rounded-up", "1");
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: ODD_PRICED_MODEL, messages, max_tokens: 8, temperature: 0 }),
    });
    expect(response.status).toBe(200);
    const { usage } = (await response.json()) as {
      usage: { prompt_tokens: number; completion_tokens: number };
    };
    expect(usage.completion_tokens).toBeGreaterThan(0);
    // SPEC section 11: ceil((prompt x input + completion x output) / 1,000,000), prices in nano-units.
    const scaled =
      BigInt(usage.prompt_tokens) * toNano(ODD_PRICES.inputPerMillion) +
      BigInt(usage.completion_tokens) * toNano(ODD_PRICES.outputPerMillion);
    // A fraction of a nano-unit to round, or rounding down would pass too.
    expect(scaled % 1_000_000n).not.toBe(0n);
    const cost = scaled / 1_000_000n + 1n;
    const [row] = await server().store.listUsage({ accountId });
    expect(row).toMatchObject({ model: ODD_PRICED_MODEL, costNano: cost });
    expect(await server().store.getAccountMoney(accountId)).toEqual({
      balanceNano: ONE - cost,
      reservedNano: 0n,
      spentNano: cost,
    });
  });

  it("charges tool calls and JSON output by their tokens", async () => {
    const { accountId, key } = await server().createFundedKey("exact-tools", "1");
    const client = new OpenAI({ baseURL: server().baseUrl, apiKey: key, maxRetries: 0 });
    const tool = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      tools: [
        {
          type: "function",
          function: {
            name: "f",
            parameters: { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          },
        },
      ],
      tool_choice: "required",
      max_tokens: 200,
      seed: 1,
    });
    const json = await client.chat.completions.create({
      model: TINY_MODEL,
      messages,
      response_format: { type: "json_object" },
      max_tokens: 200,
      seed: 2,
    });
    const rows = await server().store.listUsage({ accountId });
    expect(rows.map((row) => row.finishReason)).toEqual(["tool_calls", "stop"]);
    const total = [tool, json].reduce(
      (sum, completion) =>
        sum + expectedCost(completion.usage!.prompt_tokens, completion.usage!.completion_tokens),
      0n,
    );
    expect((await server().store.getAccountMoney(accountId))?.spentNano).toBe(total);
  });

  it("bills a stream the client left halfway for what was generated, and releases the rest", async () => {
    const { accountId, key } = await server().createFundedKey("exact-disconnect", "1");
    const controller = new AbortController();
    let response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: ENDLESS_MODEL, messages, stream: true }),
      signal: controller.signal,
    });
    for (let attempt = 0; attempt < 50 && response.status === 503; attempt++) {
      await sleep(100);
      response = await fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: ENDLESS_MODEL, messages, stream: true }),
        signal: controller.signal,
      });
    }
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let received = "";
    while (received.split('"content":"').length < 5)
      received += new TextDecoder().decode((await reader.read()).value);
    controller.abort();
    const rows = await waitForUsage(accountId, 1);
    const row = rows.filter((candidate) => candidate.costNano > 0n || candidate.completionTokens > 0).at(-1)!;
    expect(row.completionTokens).toBeGreaterThanOrEqual(3);
    // Far less than the rest of the 2048-token context that was reserved.
    expect(row.completionTokens).toBeLessThan(1000);
    expect(row.costNano).toBe(expectedCost(row.promptTokens, row.completionTokens));
    const money = await server().store.getAccountMoney(accountId);
    expect(money?.reservedNano).toBe(0n);
    expect(money?.balanceNano).toBe(ONE - row.costNano);
  });

  it("charges nothing for a request refused by a full queue, and releases its reservation", async () => {
    const { accountId, key } = await server().createFundedKey("exact-overloaded", "1");
    const holder = new AbortController();
    let held = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({ model: ENDLESS_MODEL, messages, stream: true }),
      signal: holder.signal,
    });
    for (let attempt = 0; attempt < 50 && held.status === 503; attempt++) {
      await sleep(100);
      held = await fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
        body: JSON.stringify({ model: ENDLESS_MODEL, messages, stream: true }),
        signal: holder.signal,
      });
    }
    await held.body!.getReader().read();
    const refused = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: ENDLESS_MODEL, messages, max_tokens: 5 }),
    });
    holder.abort();
    expect(refused.status).toBe(503);
    const money = await server().store.getAccountMoney(accountId);
    expect(money).toEqual({ balanceNano: ONE, reservedNano: 0n, spentNano: 0n });
    const rows = await server().store.listUsage({ accountId });
    expect(rows.map((row) => [row.costNano, row.errorCode])).toEqual([[0n, "model_overloaded"]]);
  });
});

describe("balances are never overspent", () => {
  it("admits concurrent requests only while their maximum cost fits, and audit passes", async () => {
    // A request here reserves about 1 prompt x 100 + 40 x 400 nano: the balance fits about three.
    const { accountId, key } = await server().createFundedKey("race", "0.00005");
    const responses = await Promise.all(
      Array.from({ length: 16 }, (_, index) =>
        fetch(`${server().baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 40, seed: index }),
        }),
      ),
    );
    const statuses = responses.map((response) => response.status);
    expect(statuses.filter((status) => status === 403).length).toBeGreaterThan(0);
    expect(statuses.every((status) => status === 200 || status === 403 || status === 503)).toBe(true);
    const refused = responses.find((response) => response.status === 403)!;
    expect(refused.headers.get("x-should-retry")).toBe("false");
    expect(((await refused.json()) as { error: unknown }).error).toMatchObject({
      type: "insufficient_quota",
      code: "insufficient_balance",
    });
    const money = (await server().store.getAccountMoney(accountId))!;
    expect(money.spentNano).toBeLessThanOrEqual(50_000n);
    expect(money.balanceNano).toBeGreaterThanOrEqual(0n);
    expect(money.reservedNano).toBe(0n);
    expect(await server().store.audit()).toEqual([]);
  });

  it("refuses an account whose balance is below the request's maximum cost with 403", async () => {
    const { key } = await server().createFundedKey("empty", "0");
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 5 }),
    });
    expect(response.status).toBe(403);
    expect(response.headers.get("x-should-retry")).toBe("false");
    const body = (await response.json()) as { error: Record<string, unknown> };
    expect(body.error).toMatchObject({
      type: "insufficient_quota",
      code: "insufficient_balance",
      param: null,
    });
    // What the maximum cost is made of, so a client that sent no max_tokens, or a long prompt, knows.
    expect(body.error.message).toMatch(
      /its prompt plus max_tokens, or, when max_tokens is not set, plus the most the model may generate/,
    );
    expect(body.error.message).toMatch(/set a lower max_tokens or send shorter messages/);
  });
});

describe("rate limits", () => {
  it("gives an rpm 2 key two requests at once, then 429 with retry-after and the requests headers", async () => {
    const rpm = 2;
    // The bucket refills one request in this long.
    const refillMs = 60_000 / rpm;
    const { key } = await server().createFundedKey("rpm", "1", { rpm });
    const send = () =>
      fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: 2 }),
      });
    const sentFirst = performance.now();
    const first = await send();
    expect(first.status).toBe(200);
    expect(first.headers.get("x-ratelimit-limit-requests")).toBe("2");
    expect(first.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    // A full bucket less one request: one request's refill, at the instant it was taken.
    expect(parseReset(first.headers.get("x-ratelimit-reset-requests"))).toBe(refillMs);
    expect(first.headers.get("x-ratelimit-limit-tokens")).toBeNull();
    expect((await send()).status).toBe(200);
    const third = await send();
    // The most the bucket can have refilled since the first request took from it.
    const refilledMs = performance.now() - sentFirst;
    expect(third.status).toBe(429);
    // The wait for one whole request, in seconds rounded up (a refill past a second takes one off).
    const retryAfter = Number(third.headers.get("retry-after"));
    expect(retryAfter).toBeLessThanOrEqual(Math.ceil(refillMs / 1000));
    expect(retryAfter).toBeGreaterThanOrEqual(Math.ceil((refillMs - refilledMs) / 1000));
    expect(third.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    // Until the bucket is full again, a minute less its refill, written as OpenAI does ("1m0s").
    const resetMs = parseReset(third.headers.get("x-ratelimit-reset-requests"));
    expect(resetMs).toBeLessThanOrEqual(60_000);
    expect(resetMs).toBeGreaterThanOrEqual(60_000 - refilledMs);
    expect(((await third.json()) as { error: unknown }).error).toMatchObject({
      type: "rate_limit_error",
      code: "rate_limit_exceeded",
    });
    const models = await fetch(`${server().baseUrl}/models`, { headers: { authorization: `Bearer ${key}` } });
    expect(models.headers.get("x-ratelimit-limit-requests")).toBe("2");
  });

  it("limits tokens per minute at the reservation estimate, with the tokens headers", async () => {
    const { key } = await server().createFundedKey("tpm", "1", { tpm: 100 });
    const send = (maxTokens: number) =>
      fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: maxTokens }),
      });
    const tooLarge = await send(500);
    expect(tooLarge.status).toBe(429);
    expect(((await tooLarge.json()) as { error: { message: string } }).error.message).toMatch(
      /too large.*when max_tokens is not set, plus the most the model may generate/i,
    );
    // No wait makes it fit: OpenAI's SDKs are told not to send it again.
    expect(tooLarge.headers.get("x-should-retry")).toBe("false");
    // Every 429 carries retry-after (SPEC section 4); the SDKs obey x-should-retry first.
    expect(Number(tooLarge.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    const fits = await send(3);
    expect(fits.status).toBe(200);
    expect(fits.headers.get("x-ratelimit-limit-tokens")).toBe("100");
    expect(fits.headers.get("x-ratelimit-limit-requests")).toBeNull();
  });

  it("puts the token rate before the context length (SPEC section 11), spending nothing on the refusal", async () => {
    const send = (key: string, maxTokens: number) =>
      fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ model: TINY_MODEL, messages, max_tokens: maxTokens }),
      });
    // Over the 1024-token context and over the key's whole token rate: 429 first.
    const short = await server().createFundedKey("tpm-before-context", "1", { tpm: 100 });
    const limited = await send(short.key, 5_000);
    expect(limited.status).toBe(429);
    expect(((await limited.json()) as { error: { code: string } }).error.code).toBe("rate_limit_exceeded");
    // Over the context only: 400, and the key's tokens are all there for the next request.
    const roomy = await server().createFundedKey("context-after-tpm", "1", { tpm: 100_000 });
    const tooLong = await send(roomy.key, 5_000);
    expect(tooLong.status).toBe(400);
    expect(((await tooLong.json()) as { error: { code: string } }).error.code).toBe(
      "context_length_exceeded",
    );
    const next = await send(roomy.key, 1);
    expect(next.status).toBe(200);
    const remaining = Number(next.headers.get("x-ratelimit-remaining-tokens"));
    // Only the next request's own estimate (its prompt and one token) was taken.
    expect(remaining).toBeGreaterThan(100_000 - 100);
  });

  it("sends no rate-limit headers for a key without limits", async () => {
    const response = await fetch(`${server().baseUrl}/models`, {
      headers: { authorization: `Bearer ${server().starterKey}` },
    });
    expect([...response.headers.keys()].filter((name) => name.startsWith("x-ratelimit"))).toEqual([]);
  });
});
