import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ENDLESS_MODEL, startTestServer, type TestServer, TINY_MODEL } from "../support/test-server.ts";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ parallel: 2, maxQueue: 2, withEndlessModel: true });
});

afterAll(async () => {
  await server?.close();
});

function chat(body: Record<string, unknown>, signal?: AbortSignal) {
  return fetch(`${server.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Go on." }], ...body }),
    ...(signal === undefined ? {} : { signal }),
  });
}

/**
 * Starts a stream on the endless model (waiting while an earlier test's stream still frees the
 * sequence) and reads until its first content chunk.
 */
async function holdEndlessStream() {
  const controller = new AbortController();
  let response = await chat({ model: ENDLESS_MODEL, stream: true, temperature: 1 }, controller.signal);
  for (let attempt = 0; attempt < 50 && response.status === 503; attempt++) {
    await response.arrayBuffer();
    await sleep(100);
    response = await chat({ model: ENDLESS_MODEL, stream: true, temperature: 1 }, controller.signal);
  }
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  while (!text.includes('"content":"') || text.split("data: ").length < 3) {
    const { value, done } = await reader.read();
    if (done) throw new Error("stream ended early");
    text += decoder.decode(value, { stream: true });
  }
  return { controller, reader };
}

describe("more requests than the model runs at once", () => {
  it("completes each request or refuses it with 503 model_overloaded in the error shape", async () => {
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
        expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
      }
    }
    expect(completed).toBeGreaterThanOrEqual(4);
  });

  it("answers 503 model_overloaded with retry-after while the only sequence is busy and the queue is 0", async () => {
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
    const held = await holdEndlessStream();
    held.controller.abort();
    // The endless model would hold its sequence for tens of seconds if generation went on:
    // getting a request through soon after the disconnect shows the sequence was freed.
    let status = 0;
    for (let attempt = 0; attempt < 50 && status !== 200; attempt++) {
      const response = await chat({ model: ENDLESS_MODEL, max_tokens: 1 });
      status = response.status;
      await response.arrayBuffer();
      if (status !== 200) await sleep(100);
    }
    expect(status).toBe(200);
    const health = await fetch(`${server.origin}/health`);
    expect(health.status).toBe(200);
    const next = await chat({ model: TINY_MODEL, max_tokens: 4 });
    expect(next.status).toBe(200);
  });

  it("stops a non-streamed generation when the client goes away", async () => {
    const controller = new AbortController();
    const pending = chat({ model: ENDLESS_MODEL, temperature: 1 }, controller.signal).catch(
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
