import { afterEach, describe, expect, it } from "vitest";
import { ENDLESS_MODEL, startTestServer, type TestServer, TINY_MODEL } from "../support/test-server.ts";

let server: TestServer | undefined;

afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function startStream(test: TestServer, model: string, maxTokens?: number) {
  const response = await fetch(`${test.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${test.starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model,
      messages: [{ role: "user", content: "Go" }],
      stream: true,
      ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
    }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const first = await reader.read();
  let text = new TextDecoder().decode(first.value);
  return {
    async rest() {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        text += new TextDecoder().decode(chunk.value);
      }
      return text;
    },
  };
}

describe("graceful shutdown", () => {
  it("lets a stream in flight finish within the grace period", async () => {
    server = await startTestServer();
    const stream = await startStream(server, TINY_MODEL, 40);
    const stopped = server.server.shutdown({ graceMs: 30_000 });
    const text = await stream.rest();
    await stopped;
    expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
    expect(text).toMatch(/"finish_reason":"(stop|length)"/);
    expect(text).not.toContain('"error"');
  });

  it("cuts a stream that outlives the grace period with an error event, and settles it", async () => {
    server = await startTestServer({ withEndlessModel: true });
    const stream = await startStream(server, ENDLESS_MODEL);
    const stopped = server.server.shutdown({ graceMs: 300 });
    const text = await stream.rest();
    await stopped;
    const events = text.split("\n\n").filter((event) => event !== "");
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(JSON.parse(events.at(-2)!.slice(6))).toMatchObject({
      error: { code: "model_unavailable", type: "server_error" },
    });
    const starter = await server.store.getAccountByName("starter");
    const [row] = await server.store.listUsage({ accountId: starter!.id });
    expect(row?.completionTokens).toBeGreaterThan(0);
    expect(row?.costNano).toBeGreaterThan(0n);
    expect(await server.store.listReservations()).toEqual([]);
  });
});
