/**
 * A completion's `created` is when its request came in (as OpenAI's is), streamed or not: not when
 * its answer began. Regression: it was stamped once the first part arrived, so an upstream that
 * took seconds to answer (or a queue, or a model still loading) moved it by that long.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { beforeAll, describe, expect, it } from "vitest";
import { chunk, writeEvents } from "./mock-upstream.ts";
import { postChat, useUpstreamOnlyServer } from "./use-upstream-only-server.ts";

/** How long the upstream waits before it answers: more than a second, so `created` shows it. */
const UPSTREAM_DELAY_MS = 2_100;

const { server, upstream } = useUpstreamOnlyServer();

beforeAll(() => {
  upstream().handle(async (_request, response) => {
    await sleep(UPSTREAM_DELAY_MS);
    await writeEvents(response, [
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hi" }),
      chunk({}, "stop"),
    ]);
  });
});

/** The request's `created` values (one per event when streamed), and the second it was sent in. */
async function complete(stream: boolean): Promise<{ sentAt: number; created: number[] }> {
  const sentAt = Math.floor(Date.now() / 1000);
  const response = await postChat(server(), { stream });
  expect(response.status).toBe(200);
  if (!stream) return { sentAt, created: [((await response.json()) as { created: number }).created] };
  const created = (await response.text())
    .split("\n")
    .filter((line) => line.startsWith("data: {"))
    .map((line) => (JSON.parse(line.slice("data: ".length)) as { created: number }).created);
  return { sentAt, created };
}

describe("a completion's created", () => {
  for (const stream of [false, true]) {
    it(`is the second its request came in, not when a slow upstream answered (stream: ${stream})`, async () => {
      const { sentAt, created } = await complete(stream);
      expect(created.length).toBeGreaterThan(0);
      // Within the second after sending (a request may cross into the next), never 2 s later.
      for (const value of created) expect(value - sentAt).toBeLessThanOrEqual(1);
      expect(new Set(created).size).toBe(1);
    });
  }
});
