import { PassThrough } from "node:stream";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { convertChatRequest } from "../../src/api/convert-chat-request.ts";
import { formatAmount } from "../../src/billing/money.ts";
import type { CatalogModel } from "../../src/catalog/catalog.ts";
import { countPromptTokensAtMost } from "../../src/engine/openai/estimate-prompt-tokens.ts";
import { type MockUpstream, startMockUpstream, streamText } from "../engine/openai/mock-upstream.ts";
import { findFreePort } from "../support/free-port.ts";
import { getTestModelPath } from "../support/test-model.ts";
import { createTinyModelEntry, startTestServer, type TestServer } from "../support/test-server.ts";

/** Its only endpoint refuses connections, at once (no retries): the fallback serves. */
const PRIMARY = "primary-down";
/** The fallback, dearer: 2.00 in and 10.00 out per million tokens, 2,000 and 10,000 nano per token. */
const FALLBACK = "fallback-dear";
/** Served by its own upstream, without a context length (the reservation bound goes upstream). */
const UNBOUNDED = "unbounded";
/** Its only endpoint refuses connections; it falls back to a local model at the same prices. */
const PRIMARY_LOCAL = "primary-local-fallback";
/** Its only endpoint refuses connections; its context (100,000) is far wider than its fallback's. */
const PRIMARY_WIDE = "primary-wide";
/** The tiny local model at 1.00 in and 1.00 out per million tokens: 1,000 nano per token. */
const LOCAL_DEAR = "tiny-dear";

let upstream: MockUpstream;
let server: TestServer;
/** The server's JSON log lines. */
const logLines: Record<string, unknown>[] = [];

function upstreamModel(
  id: string,
  options: {
    baseUrl: string;
    prices: [string, string];
    fallbacks?: string[];
    contextLength?: number;
  },
): CatalogModel {
  return {
    id,
    kind: "chat",
    ownedBy: "acme",
    pricing: { kind: "chat", inputPerMillion: options.prices[0], outputPerMillion: options.prices[1] },
    contextLength: options.contextLength,
    created: 1_700_000_200,
    engine: {
      type: "openai",
      endpoints: [{ baseUrl: options.baseUrl, apiKey: undefined }],
      model: `${id}-upstream`,
      fallbacks: options.fallbacks ?? [],
      maxRetries: 0,
    },
  };
}

beforeAll(async () => {
  upstream = await startMockUpstream();
  const closedPort = await findFreePort();
  const logs = new PassThrough();
  let partial = "";
  logs.on("data", (data: Buffer) => {
    const lines = (partial + data.toString()).split("\n");
    partial = lines.pop() ?? "";
    for (const line of lines) if (line.trim() !== "") logLines.push(JSON.parse(line));
  });
  server = await startTestServer({
    logDestination: logs,
    extraModels: [
      upstreamModel(PRIMARY, {
        baseUrl: `http://127.0.0.1:${closedPort}/v1`,
        prices: ["1.00", "1.00"],
        fallbacks: [FALLBACK],
        contextLength: 8192,
      }),
      upstreamModel(FALLBACK, { baseUrl: upstream.baseUrl, prices: ["2.00", "10.00"], contextLength: 8192 }),
      upstreamModel(PRIMARY_WIDE, {
        baseUrl: `http://127.0.0.1:${closedPort}/v1`,
        prices: ["1.00", "1.00"],
        fallbacks: [FALLBACK],
        contextLength: 100_000,
      }),
      upstreamModel(UNBOUNDED, { baseUrl: upstream.baseUrl, prices: ["1.00", "1.00"] }),
      upstreamModel(PRIMARY_LOCAL, {
        baseUrl: `http://127.0.0.1:${closedPort}/v1`,
        prices: ["1.00", "1.00"],
        fallbacks: [LOCAL_DEAR],
        contextLength: 8192,
      }),
      {
        ...createTinyModelEntry(await getTestModelPath()),
        id: LOCAL_DEAR,
        pricing: { kind: "chat", inputPerMillion: "1.00", outputPerMillion: "1.00" },
      },
    ],
  });
});

afterAll(async () => {
  await server?.close();
  await upstream?.close();
});

beforeEach(() => {
  upstream.requests.length = 0;
  upstream.handle(streamText(["Served", " by", " the", " fallback"], { usage: [10, 4] }));
});

const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [{ role: "user", content: "Hello" }];
/** The fallback's price of the mock's usage: 10 prompt and 4 completion tokens. */
const FALLBACK_COST = 10n * 2_000n + 4n * 10_000n;

describe("a request served by a fallback model", () => {
  it("answers under the fallback's id and charges the fallback's prices", async () => {
    const { accountId, key } = await server.createFundedKey("fallback-plain", "1");
    const client = new OpenAI({ baseURL: server.baseUrl, apiKey: key, maxRetries: 0 });
    const completion = await client.chat.completions.create({ model: PRIMARY, messages, max_tokens: 50 });
    expect(completion.model).toBe(FALLBACK);
    expect(completion.choices[0]?.message.content).toBe("Served by the fallback");
    expect(upstream.requests[0]?.body).toMatchObject({ model: `${FALLBACK}-upstream` });
    const [row, ...others] = await server.store.listUsage({ accountId });
    expect(others).toEqual([]);
    expect(row).toMatchObject({
      model: FALLBACK,
      promptTokens: 10,
      completionTokens: 4,
      costNano: FALLBACK_COST,
    });
    expect(await server.store.getAccountMoney(accountId)).toEqual({
      balanceNano: 1_000_000_000n - FALLBACK_COST,
      reservedNano: 0n,
      spentNano: FALLBACK_COST,
    });
  });

  it("names the fallback in every streamed chunk", async () => {
    const { accountId, key } = await server.createFundedKey("fallback-stream", "1");
    const client = new OpenAI({ baseURL: server.baseUrl, apiKey: key, maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: PRIMARY,
      messages,
      max_tokens: 50,
      stream: true,
      stream_options: { include_usage: true },
    });
    const models = new Set<string>();
    let text = "";
    for await (const event of stream) {
      models.add(event.model);
      text += event.choices[0]?.delta.content ?? "";
    }
    expect([...models]).toEqual([FALLBACK]);
    expect(text).toBe("Served by the fallback");
    const [row] = await server.store.listUsage({ accountId });
    expect(row).toMatchObject({ model: FALLBACK, costNano: FALLBACK_COST });
  });

  it("logs the failed attempt and the fallback under the request's id, as the client sees it", async () => {
    const { key } = await server.createFundedKey("fallback-logged", "1");
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${key}`,
        "content-type": "application/json",
        "x-request-id": "trace-fallback-7f3a",
      },
      body: JSON.stringify({ model: PRIMARY, messages, max_tokens: 50 }),
    });
    expect(response.status).toBe(200);
    await response.text();
    const requestId = response.headers.get("x-request-id");
    expect(requestId).toBe("trace-fallback-7f3a");
    const linesOf = (message: string) => logLines.filter((line) => line.msg === message);
    await expect.poll(() => linesOf("request").some((line) => line.reqId === requestId)).toBe(true);
    const attempts = linesOf("upstream attempt failed").filter((line) => line.model === PRIMARY);
    expect(attempts.map((line) => line.reqId)).toContain(requestId);
    expect(linesOf("request served by a fallback model").map((line) => line.reqId)).toContain(requestId);
  });

  it("logs the completion's id on the request's line, which a client quoting the answer has (regression: in no log or row)", async () => {
    const { key } = await server.createFundedKey("completion-id-logged", "1");
    const client = new OpenAI({ baseURL: server.baseUrl, apiKey: key, maxRetries: 0 });
    for (const stream of [false, true]) {
      let id: string | undefined;
      if (stream) {
        for await (const chunk of await client.chat.completions.create({ model: PRIMARY, messages, stream }))
          id = chunk.id;
      } else id = (await client.chat.completions.create({ model: PRIMARY, messages })).id;
      expect(id).toMatch(/^chatcmpl-/);
      await expect
        .poll(() => logLines.find((line) => line.msg === "request" && line.completion === id))
        .toMatchObject({ status: 200, model: PRIMARY, servedBy: FALLBACK });
    }
  });

  it("reserves what the dearest model that may serve would cost", async () => {
    // 1,000 completion tokens: at most about 0.001 on the primary, 0.01 on the fallback.
    const { accountId, key } = await server.createFundedKey("fallback-short", "0.005");
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: PRIMARY, messages, max_tokens: 1000 }),
    });
    expect(response.status).toBe(403);
    const body = (await response.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("insufficient_balance");
    // Regression: the client could not tell that a fallback's prices set the maximum.
    expect(body.error.message).toContain(
      `plus the most the model may generate, at the prices of '${FALLBACK}', the dearest of the fallbacks that may serve it. Add credit`,
    );
    expect(upstream.requests).toEqual([]);
    expect(await server.store.listUsage({ accountId })).toEqual([]);
  });
});

describe("a fallback whose context is narrower than the primary's", () => {
  async function send(key: string, maxTokens: number | undefined) {
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: PRIMARY_WIDE,
        messages,
        ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
      }),
    });
    return {
      status: response.status,
      body: (await response.json()) as { model?: string; error?: { code: string; message: string } },
    };
  }

  it("is reserved for no more completion than its own context leaves (regression: the primary's room, 403)", async () => {
    // The primary may generate about 100,000 tokens (about 0.1 at 1.00 per million); the
    // fallback no more than its 8,192-token context leaves (about 0.082 at 10.00 per million).
    // Priced at the primary's room, the fallback's share was about 1.0.
    const { accountId, key } = await server.createFundedKey("narrow-fallback", "0.15");
    const served = await send(key, undefined);
    expect(served.status).toBe(200);
    expect(served.body.model).toBe(FALLBACK);
    const [row] = await server.store.listUsage({ accountId });
    expect(row).toMatchObject({ model: FALLBACK, costNano: FALLBACK_COST });
  });

  it("adds nothing to the reservation when its context cannot hold max_tokens (regression: priced, 403)", async () => {
    // 9,000 completion tokens: about 0.009 on the primary; the fallback (8,192) would refuse
    // them, and was priced for them at about 0.09.
    const { accountId, key } = await server.createFundedKey("narrow-fallback-refuses", "0.02");
    const refused = await send(key, 9000);
    expect(refused.status).toBe(503);
    expect(refused.body.error?.message).toMatch(
      new RegExp(`The fallback model '${FALLBACK}' cannot take it`),
    );
    expect(upstream.requests).toEqual([]);
    const [row] = await server.store.listUsage({ accountId });
    expect(row).toMatchObject({ model: PRIMARY_WIDE, costNano: 0n });
  });
});

describe("a request an upstream model falls back with to a local model", () => {
  // One tool: the local chat template documents it in a preamble the upstream estimate knows nothing of.
  const body = {
    messages: [{ role: "user", content: "a" }],
    tools: [{ type: "function", function: { name: "f" } }],
    max_tokens: 1,
    temperature: 0,
  };
  async function send(key: string, model: string) {
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ ...body, model }),
    });
    return {
      status: response.status,
      body: (await response.json()) as {
        model?: string;
        usage?: { prompt_tokens: number; completion_tokens: number };
        error?: { code: string; message: string };
      },
    };
  }

  it("reserves the local model's share at its own prompt count, not the upstream's estimate", async () => {
    const { key: probeKey } = await server.createFundedKey("local-count", "1");
    const direct = await send(probeKey, LOCAL_DEAR);
    expect(direct.status).toBe(200);
    const localPromptTokens = direct.body.usage?.prompt_tokens ?? 0;
    const estimateAtMost = countPromptTokensAtMost(
      convertChatRequest({ ...body, model: PRIMARY_LOCAL } as Parameters<typeof convertChatRequest>[0])
        .request,
    );
    // The case at hand: the template's tokens put the local count far above the estimate's bound.
    expect(localPromptTokens).toBeGreaterThan(estimateAtMost);
    // 1,000 nano per token, in and out, on both models: a balance between the two bounds' costs.
    const localMaxNano = BigInt(localPromptTokens + 1) * 1_000n;
    const estimatedMaxNano = BigInt(estimateAtMost + 1) * 1_000n;
    const between = formatAmount((localMaxNano + estimatedMaxNano) / 2n);
    const { accountId, key } = await server.createFundedKey("local-fallback-short", between);
    const refused = await send(key, PRIMARY_LOCAL);
    expect(refused.status).toBe(403);
    expect(refused.body.error?.code).toBe("insufficient_balance");
    expect(refused.body.error?.message).toContain(`maximum cost (${formatAmount(localMaxNano)})`);
    expect(await server.store.listUsage({ accountId })).toEqual([]);

    // Funded: served by the local model, and charged in full.
    const { accountId: paidId, key: paidKey } = await server.createFundedKey("local-fallback-paid", "1");
    const served = await send(paidKey, PRIMARY_LOCAL);
    expect(served.status).toBe(200);
    expect(served.body.model).toBe(LOCAL_DEAR);
    const usage = served.body.usage ?? { prompt_tokens: 0, completion_tokens: 0 };
    expect(usage.prompt_tokens).toBe(localPromptTokens);
    const costNano = BigInt(usage.prompt_tokens + usage.completion_tokens) * 1_000n;
    const [row] = await server.store.listUsage({ accountId: paidId });
    expect(row).toMatchObject({ model: LOCAL_DEAR, costNano });
    expect((await server.store.getAccountMoney(paidId))?.balanceNano).toBe(1_000_000_000n - costNano);
  });
});

describe("a fallback that cannot take the request", () => {
  it("is named in the primary's 503 with its reason, and nothing is charged", async () => {
    const { accountId, key } = await server.createFundedKey("fallback-refuses", "1");
    // Within the primary's 8,192-token context, past the local fallback's 1,024.
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: PRIMARY_LOCAL,
        messages: [{ role: "user", content: "hello ".repeat(1500) }],
        max_tokens: 1,
      }),
    });
    expect(response.status).toBe(503);
    const { error } = (await response.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("upstream_unavailable");
    expect(error.message).toMatch(
      new RegExp(`The fallback model '${LOCAL_DEAR}' cannot take it: .*context`, "s"),
    );
    const [row] = await server.store.listUsage({ accountId });
    expect(row).toMatchObject({ model: PRIMARY_LOCAL, costNano: 0n });
  });
});

describe("a key that may not use the fallback", () => {
  it("is not served by it: the primary's failure reaches the client, and nothing is charged", async () => {
    const { accountId, key } = await server.createFundedKey("primary-only", "1", {
      allowedModels: [PRIMARY],
    });
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: PRIMARY, messages, max_tokens: 50 }),
    });
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("upstream_unavailable");
    expect(upstream.requests).toEqual([]);
    const [row] = await server.store.listUsage({ accountId });
    expect(row).toMatchObject({ model: PRIMARY, costNano: 0n, errorCode: "upstream_unavailable" });
  });

  it("reserves only for the models it may be served by", async () => {
    // Enough for the primary's 1,000 completion tokens (about 0.001), not the fallback's (0.01).
    const { key } = await server.createFundedKey("primary-only-short", "0.005", { allowedModels: [PRIMARY] });
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: PRIMARY, messages, max_tokens: 1000 }),
    });
    // Past billing, the primary's own failure: not refused for the fallback's price.
    expect(response.status).toBe(503);
  });
});

describe("max_tokens sent upstream", () => {
  async function sentMaxTokens(model: string, maxTokens: number | undefined): Promise<unknown> {
    upstream.requests.length = 0;
    const response = await fetch(`${server.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model,
        messages,
        ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
      }),
    });
    expect(response.status).toBe(200);
    return upstream.requests[0]?.body.max_tokens;
  }

  it("is the bound that was reserved when the catalogue gives no context length", async () => {
    expect(await sentMaxTokens(UNBOUNDED, undefined)).toBe(4096);
  });

  it("is left to the upstream's context when the catalogue gives a context length", async () => {
    expect(await sentMaxTokens(FALLBACK, undefined)).toBeUndefined();
  });

  it("is the client's own when it sends one", async () => {
    expect(await sentMaxTokens(UNBOUNDED, 7)).toBe(7);
    expect(await sentMaxTokens(FALLBACK, 9)).toBe(9);
  });
});

describe("an upstream prompt above its estimate", () => {
  /** 1.00 per million in and out: 1,000 nano-units a token. */
  const NANO_PER_TOKEN = 1_000n;
  /** What the reservation rests on: the most prompt tokens the request can count, and `max_tokens` 2. */
  const promptAtMost = BigInt(
    countPromptTokensAtMost(
      convertChatRequest({ model: UNBOUNDED, messages: [{ role: "user", content: "Hello" }], max_tokens: 2 })
        .request,
    ),
  );
  const reservedNano = (promptAtMost + 2n) * NANO_PER_TOKEN;
  /** The upstream counts more prompt tokens than even that (a template far larger, say). */
  const realPrompt = promptAtMost + 40n;

  beforeEach(() => {
    upstream.handle(streamText(["Hi", "!"], { usage: [Number(realPrompt), 2] }));
  });

  async function ask(key: string) {
    const client = new OpenAI({ baseURL: server.baseUrl, apiKey: key, maxRetries: 0 });
    return await client.chat.completions.create({ model: UNBOUNDED, messages, max_tokens: 2 });
  }

  it("is charged in full when the account can pay it", async () => {
    const { accountId, key } = await server.createFundedKey("prompt-above-rich", "1");
    await ask(key);
    const cost = (realPrompt + 2n) * NANO_PER_TOKEN;
    expect(cost).toBeGreaterThan(reservedNano);
    expect(await server.store.listUsage({ accountId })).toMatchObject([{ costNano: cost }]);
    expect(await server.store.getAccountMoney(accountId)).toEqual({
      balanceNano: 1_000_000_000n - cost,
      reservedNano: 0n,
      spentNano: cost,
    });
  });

  it("never takes the balance below zero: the charge stops at what the account has", async () => {
    // Exactly the reservation: the request is admitted and its answer delivered.
    const { accountId, key } = await server.createFundedKey("prompt-above-poor", formatAmount(reservedNano));
    const completion = await ask(key);
    const cost = (realPrompt + 2n) * NANO_PER_TOKEN;
    expect(completion.choices[0]?.message.content).toBe("Hi!");
    expect(completion.usage).toMatchObject({ prompt_tokens: Number(realPrompt), completion_tokens: 2 });
    expect(await server.store.listUsage({ accountId })).toMatchObject([
      { promptTokens: Number(realPrompt), completionTokens: 2, costNano: reservedNano },
    ]);
    expect(await server.store.getAccountMoney(accountId)).toEqual({
      balanceNano: 0n,
      reservedNano: 0n,
      spentNano: reservedNano,
    });
    expect(await server.store.audit()).toEqual([]);
    // The request's log line tells what the account could not pay.
    const logged = () => logLines.find((line) => line.uncharged !== undefined);
    for (let attempt = 0; attempt < 50 && logged() === undefined; attempt++) await sleep(20);
    expect(logged()).toMatchObject({
      status: 200,
      model: UNBOUNDED,
      cost: formatAmount(reservedNano),
      uncharged: formatAmount(cost - reservedNano),
    });
  });
});
