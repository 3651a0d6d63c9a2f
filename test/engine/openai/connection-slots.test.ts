import { afterEach, describe, expect, it } from "vitest";
import type { StreamPart } from "../../../src/engine/engine.ts";
import { ConnectionSlots } from "../../../src/engine/openai/connection-slots.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  collectParts,
  createTestEngine,
  startTestMock,
  upstreamModel,
} from "./engine-helpers.ts";
import { textEvents, writeEvents } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

describe("ConnectionSlots", () => {
  it("grants up to its limit, then in arrival order as slots come back; a withdrawn waiter is skipped", () => {
    const slots = new ConnectionSlots(2);
    const granted: string[] = [];
    slots.acquire(() => granted.push("a"));
    slots.acquire(() => granted.push("b"));
    slots.acquire(() => granted.push("c"));
    const withdrawD = slots.acquire(() => granted.push("d"));
    slots.acquire(() => granted.push("e"));
    expect(granted).toEqual(["a", "b"]);
    expect(slots.waiting).toBe(3);
    withdrawD();
    slots.release();
    slots.release();
    expect(granted).toEqual(["a", "b", "c", "e"]);
    slots.release();
    slots.release();
    slots.acquire(() => granted.push("f"));
    slots.acquire(() => granted.push("g"));
    slots.acquire(() => granted.push("h"));
    expect(granted).toEqual(["a", "b", "c", "e", "f", "g"]);
  });
});

describe("upstream engine: max_connections", () => {
  /** An upstream that answers in 200 ms, behind an engine with one connection to it. */
  async function startSlowSingleConnection() {
    const upstream = await startTestMock(async (_request, response) => {
      await new Promise((resolve) => setTimeout(resolve, 200));
      await writeEvents(response, textEvents(["ok"]));
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      settings: { maxConnections: 1, maxRetries: 0 },
    });
    return { upstream, engine };
  }

  it("counts requests waiting for a connection as waiting, not running", async () => {
    const { engine } = await startSlowSingleConnection();
    const runs = Array.from({ length: 3 }, () => collectParts(engine));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(engine.load?.()).toEqual({ running: 1, waiting: 2 });
    await Promise.all(runs);
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
  });

  it("keeps its connection when requests waiting for it are abandoned (regression: each abandoned one closed it)", async () => {
    const { upstream, engine } = await startSlowSingleConnection();
    const first = collectParts(engine);
    await new Promise((resolve) => setTimeout(resolve, 20));
    // Five clients queue behind it and give up; one more stays.
    const abandoned = Array.from({ length: 5 }, async () => {
      const prepared = await engine.prepare(chatRequest());
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 50);
      const parts: StreamPart[] = [];
      for await (const batch of prepared.run(controller.signal)) parts.push(...batch);
      return parts;
    });
    const live = collectParts(engine);
    for (const parts of await Promise.all(abandoned))
      expect(parts.at(-1)).toMatchObject({ type: "finish", rawReason: "abort" });
    expect((await first).at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect((await live).at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    // Only the two that stayed were sent, one after the other on the one connection.
    expect(upstream.requests).toHaveLength(2);
    expect(upstream.requests[1]?.clientPort).toBe(upstream.requests[0]?.clientPort);
  });
});
