import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { UsageRecord } from "../../src/store/store.ts";
import { readUntilContent } from "../support/read-until-content.ts";
import { getTestModelPath } from "../support/test-model.ts";
import {
  createTinyModelEntry,
  ENDLESS_MODEL,
  startTestServer,
  type TestServer,
  TINY_MODEL,
} from "../support/test-server.ts";

/** The endless model with two sequences and a queue of two: both busy, two wait, the next is refused. */
const QUEUED_MODEL = "tiny-endless-queued";
/** Far more than the setup around a held stream takes, far less than the test's time. */
const HOLDER_MAX_TOKENS = 600;

let server: TestServer;

beforeAll(async () => {
  const queued = createTinyModelEntry(await getTestModelPath({ endless: true, size: "small" }), {
    parallel: 2,
    maxQueue: 2,
    contextLength: 2048,
  });
  server = await startTestServer({
    parallel: 2,
    maxQueue: 2,
    withEndlessModel: true,
    extraModels: [{ ...queued, id: QUEUED_MODEL }],
  });
});

afterAll(async () => {
  await server?.close();
});

function chat(body: Record<string, unknown>, options: { signal?: AbortSignal; key?: string } = {}) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${options.key ?? server.starterKey}`,
      "content-type": "application/json",
    },
    body: JSON.stringify({ messages: [{ role: "user", content: "Go on." }], ...body }),
    ...(options.signal === undefined ? {} : { signal: options.signal }),
  });
}

/** The model's requests in its engine and waiting for it, as `/metrics` tells them. */
async function modelRequests(model: string): Promise<{ running: number; waiting: number }> {
  const metrics = await (await fetch(`${server.origin}/metrics`)).text();
  const read = (state: string) =>
    Number(
      new RegExp(`^tollgate_model_requests\\{model="${model}",state="${state}"\\} (\\d+)$`, "m").exec(
        metrics,
      )?.[1],
    );
  return { running: read("running"), waiting: read("waiting") };
}

/** The usage row of the account's only request, once it is settled. */
async function untilUsageRecorded(accountId: string): Promise<UsageRecord> {
  for (;;) {
    const [row, ...others] = await server.store.listUsage({ accountId });
    expect(others).toEqual([]);
    if (row !== undefined) return row;
    await sleep(50);
  }
}

/** Waits until nothing runs on or waits for `model` (an earlier test's aborted stream has ended). */
async function untilModelIdle(model: string): Promise<void> {
  for (;;) {
    const { running, waiting } = await modelRequests(model);
    if (running === 0 && waiting === 0) return;
    await sleep(50);
  }
}

/** Starts a stream on an endless model and reads until its first content chunk. */
async function holdEndlessStream(
  options: { model?: string; key?: string; maxTokens?: number; temperature?: number } = {},
) {
  const controller = new AbortController();
  const response = await chat(
    {
      model: options.model ?? ENDLESS_MODEL,
      stream: true,
      temperature: options.temperature ?? 1,
      ...(options.maxTokens === undefined ? {} : { max_tokens: options.maxTokens }),
    },
    { signal: controller.signal, ...(options.key === undefined ? {} : { key: options.key }) },
  );
  expect(response.status).toBe(200);
  const reader = await readUntilContent(response);
  return { controller, reader };
}

describe("more requests than the model runs at once", () => {
  it("answers every request of a burst with a completion or 503 model_overloaded in the error shape", async () => {
    const responses = await Promise.all(
      Array.from({ length: 12 }, (_, index) => chat({ model: TINY_MODEL, max_tokens: 24, seed: index })),
    );
    let completed = 0;
    for (const response of responses) {
      const body = (await response.json()) as { choices?: unknown[]; error?: Record<string, unknown> };
      if (response.status === 200) {
        completed++;
        expect(body.choices).toHaveLength(1);
      } else {
        expect(response.status).toBe(503);
        expect(body.error).toMatchObject({ code: "model_overloaded", type: "server_error" });
        expect(response.headers.get("retry-after")).toBe("1");
      }
    }
    // The first parallel + max_queue requests always get in.
    expect(completed).toBeGreaterThanOrEqual(4);
  });

  it("queues max_queue requests behind its busy sequences and refuses the next with 503 model_overloaded", async () => {
    // Greedy, the endless model never ends these by itself: both sequences stay busy until the holders leave.
    const holders = [
      await holdEndlessStream({ model: QUEUED_MODEL, temperature: 0, maxTokens: HOLDER_MAX_TOKENS }),
      await holdEndlessStream({ model: QUEUED_MODEL, temperature: 0, maxTokens: HOLDER_MAX_TOKENS }),
    ];
    let others: Promise<Response>[] = [];
    try {
      const requests = [0, 1, 2].map(() => chat({ model: QUEUED_MODEL, max_tokens: 2 }));
      // While both sequences are busy, only a refusal can answer; ignoring max_queue, the first
      // answer would be a completion after the holders' max_tokens.
      const first = await Promise.race(requests.map((request, index) => request.then(() => index)));
      const refused = await requests[first]!;
      others = requests.filter((_, index) => index !== first);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(((await refused.json()) as { error: unknown }).error).toEqual({
        message: `The model '${QUEUED_MODEL}' is busy with other requests and its queue is full (2 running, 2 waiting). Please retry shortly.`,
        type: "server_error",
        code: "model_overloaded",
        param: null,
      });
      expect(await modelRequests(QUEUED_MODEL)).toEqual({ running: 2, waiting: 2 });
    } finally {
      for (const holder of holders) holder.controller.abort();
    }
    for (const response of await Promise.all(others)) {
      expect(response.status).toBe(200);
      expect(((await response.json()) as { choices: unknown[] }).choices).toHaveLength(1);
    }
  });

  it("answers 503 model_overloaded with retry-after while the only sequence is busy and the queue is 0", async () => {
    await untilModelIdle(ENDLESS_MODEL);
    const held = await holdEndlessStream();
    try {
      const response = await chat({ model: ENDLESS_MODEL, max_tokens: 1 });
      expect(response.status).toBe(503);
      expect(response.headers.get("retry-after")).toBe("1");
      const body = (await response.json()) as { error: Record<string, unknown> };
      expect(body.error).toMatchObject({ code: "model_overloaded", type: "server_error", param: null });
    } finally {
      held.controller.abort();
    }
  });
});

describe("client disconnect", () => {
  it("stops generation and frees the sequence, and the server stays healthy", async () => {
    const { accountId, key } = await server.createFundedKey("left-stream", "1");
    await untilModelIdle(ENDLESS_MODEL);
    const held = await holdEndlessStream({ key, maxTokens: HOLDER_MAX_TOKENS });
    held.controller.abort();
    // Settled once generation ended: the endless model goes on to max_tokens unless the
    // disconnect stops it.
    const row = await untilUsageRecorded(accountId);
    expect(row.completionTokens).toBeGreaterThan(0);
    expect(row.completionTokens).toBeLessThan(HOLDER_MAX_TOKENS);
    expect(row).toMatchObject({ errorCode: "client_closed", finishReason: undefined });
    // The sequence went back before the settlement: the next request runs at once.
    expect(await modelRequests(ENDLESS_MODEL)).toEqual({ running: 0, waiting: 0 });
    const next = await chat({ model: ENDLESS_MODEL, max_tokens: 1 });
    expect(next.status).toBe(200);
    await next.arrayBuffer();
    const health = await fetch(`${server.origin}/health`);
    expect(health.status).toBe(200);
    const tiny = await chat({ model: TINY_MODEL, max_tokens: 4 });
    expect(tiny.status).toBe(200);
  });

  it("stops a non-streamed generation when the client goes away", async () => {
    const controller = new AbortController();
    const pending = chat({ model: ENDLESS_MODEL, temperature: 1 }, { signal: controller.signal }).catch(
      (error: unknown) => error,
    );
    // Wait until the request holds the sequence (a second request is refused), then leave.
    let busy = false;
    for (let attempt = 0; attempt < 50 && !busy; attempt++) {
      const probe = await chat({ model: ENDLESS_MODEL, max_tokens: 1 });
      busy = probe.status === 503;
      await probe.arrayBuffer();
      if (!busy) await sleep(50);
    }
    expect(busy).toBe(true);
    controller.abort();
    await pending;
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      const response = await chat({ model: ENDLESS_MODEL, max_tokens: 1 });
      status = response.status;
      await response.arrayBuffer();
      if (status !== 200) await sleep(100);
    }
    expect(status).toBe(200);
  });
});
