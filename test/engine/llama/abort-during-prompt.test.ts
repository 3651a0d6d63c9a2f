/**
 * Regression: a client that left while its prompt was evaluated held the local model's sequence
 * until the whole prompt was evaluated, and was then charged the prompt and the one token sampled
 * after it left (SPEC §4: a disconnect stops generation at once; a request that produced nothing
 * costs nothing). Both generation paths are covered: the direct one (plain text) and LlamaChat's
 * (tools offered). Timings are compared with the same prompt's evaluation measured in the test.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CLIENT_CLOSED } from "../../../src/chat/chat-service.ts";
import { readLlamaEngineStats } from "../../../src/engine/llama/llama-engine-stats.ts";
import { getTestModelPath } from "../../support/test-model.ts";
import { createTinyModelEntry, startTestServer, type TestServer } from "../../support/test-server.ts";
import { until } from "../../support/until.ts";

/** One sequence, so that a second request waits for the first; batches of 512 prompt tokens. */
const MODEL = "prompt-abort";

/** About 3600 prompt tokens: seven batches, seconds of evaluation on the small test model. */
const longPrompt = "the weather in paris is nice today and ".repeat(250);
/** About 400 prompt tokens (with or without the tool's documentation): a single batch. */
const shortPrompt = "the weather in paris is nice today and ".repeat(25);

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

/** What makes a request take one path or the other (create-llama-engine.ts). */
const paths = [
  { path: "direct (text)", extra: {} },
  { path: "LlamaChat (tools offered)", extra: { tools, tool_choice: "auto" } },
] as const;

let server: TestServer;

beforeAll(async () => {
  const path = await getTestModelPath({ endless: true, size: "small" });
  server = await startTestServer({
    extraModels: [
      { ...createTinyModelEntry(path, { parallel: 1, maxQueue: 4, contextLength: 4096 }), id: MODEL },
    ],
  });
  // Loaded, and its weights read once, before anything is timed.
  await until(async () => (await fetch(`${server.origin}/ready`)).status === 200, "the models to load");
  const warmUp = await chat(server.starterKey, { messages: [{ role: "user", content: "Hi." }] }, "warm-up");
  expect(warmUp.status).toBe(200);
  await warmUp.arrayBuffer();
});

afterAll(async () => {
  await server?.close();
});

function chat(key: string, body: Record<string, unknown>, requestId: string, signal?: AbortSignal) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${key}`,
      "content-type": "application/json",
      "x-request-id": requestId,
    },
    body: JSON.stringify({ model: MODEL, max_tokens: 2, temperature: 0, ...body }),
    ...(signal === undefined ? {} : { signal }),
  });
}

function leasedSequences(): number {
  return readLlamaEngineStats().find((stats) => stats.model === MODEL)?.leased ?? 0;
}

/** Milliseconds a request takes on the idle model, read to its end. */
async function timeRequest(key: string, body: Record<string, unknown>, requestId: string): Promise<number> {
  await until(() => leasedSequences() === 0, "a free sequence");
  const started = performance.now();
  const response = await chat(key, body, requestId);
  expect(response.status).toBe(200);
  await response.arrayBuffer();
  return performance.now() - started;
}

/** Sends a request and leaves once its prompt is being evaluated; answers the moment it left. */
async function sendAndLeaveDuringPrompt(
  key: string,
  body: Record<string, unknown>,
  requestId: string,
): Promise<number> {
  await until(() => leasedSequences() === 0, "a free sequence");
  const controller = new AbortController();
  const pending = chat(key, body, requestId, controller.signal).catch((error: unknown) => error);
  await until(() => leasedSequences() === 1, "the request to take the sequence");
  // Well inside the evaluation of the prompt's first batch (hundreds of milliseconds).
  await sleep(20);
  controller.abort();
  const left = performance.now();
  expect(await pending).toMatchObject({ name: "AbortError" });
  return left;
}

async function usageRowOf(accountId: string, requestId: string) {
  for (let attempt = 0; attempt < 200; attempt++) {
    const row = (await server.store.listUsage({ accountId })).find((found) => found.requestId === requestId);
    if (row !== undefined) return row;
    await sleep(25);
  }
  throw new Error(`no usage row for ${requestId}`);
}

/** The ledger of a request that produced nothing: its client left, nothing generated, nothing charged. */
async function expectChargedNothing(accountId: string, requestId: string) {
  const row = await usageRowOf(accountId, requestId);
  expect(row).toMatchObject({ completionTokens: 0, costNano: 0n, errorCode: CLIENT_CLOSED });
  expect(row.promptTokens).toBeGreaterThan(0);
  expect(row.firstTokenMs).toBeUndefined();
  expect(await server.store.getAccountMoney(accountId)).toMatchObject({ spentNano: 0n, reservedNano: 0n });
}

describe.each(paths)("a client that leaves while its prompt is evaluated, $path path", ({ path, extra }) => {
  const tag = path.split(" ")[0];

  it("frees the sequence within a batch for the next request, and is charged nothing", async () => {
    const { key } = await server.createFundedKey(`baseline-${tag}`, "10");
    const long = { messages: [{ role: "user", content: longPrompt }], ...extra };
    const short = { messages: [{ role: "user", content: "Hi." }], max_tokens: 1 };
    // The whole prompt evaluated (and a token or two), then a short request, on the idle model.
    const fullPromptMs = await timeRequest(key, long, `full-${tag}`);
    const shortMs = await timeRequest(key, short, `short-${tag}`);

    const leaving = await server.createFundedKey(`leaving-long-${tag}`, "10");
    const left = await sendAndLeaveDuringPrompt(leaving.key, long, `left-long-${tag}`);
    // Queued behind the request that left: it waits only for the batch under way (about a seventh of
    // the prompt), not for the rest of the prompt as it did.
    const next = await chat(key, short, `next-${tag}`);
    expect(next.status).toBe(200);
    await next.arrayBuffer();
    const nextDoneMs = performance.now() - left;
    expect(nextDoneMs - shortMs).toBeLessThan(fullPromptMs / 2);

    await expectChargedNothing(leaving.accountId, `left-long-${tag}`);
  });

  it("is not charged the token sampled after it left (a prompt of one batch)", async () => {
    const leaving = await server.createFundedKey(`leaving-short-${tag}`, "10");
    const body = { messages: [{ role: "user", content: shortPrompt }], ...extra };
    await sendAndLeaveDuringPrompt(leaving.key, body, `left-short-${tag}`);
    await expectChargedNothing(leaving.accountId, `left-short-${tag}`);
  });
});
