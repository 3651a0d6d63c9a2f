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

/** How long a poll waits for a state: a guard against a hang, not a bound the tests measure. */
const HANG_GUARD = { timeout: 10_000 };

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

  it("grants a freed slot to the tenant holding the fewest, in arrival order within a tenant", () => {
    const slots = new ConnectionSlots(2);
    const granted: string[] = [];
    const acquire = (name: string, tenant: string) => slots.acquire(() => granted.push(name), tenant);
    acquire("a1", "a");
    acquire("a2", "a");
    acquire("a3", "a");
    acquire("a4", "a");
    const withdrawB1 = acquire("b1", "b");
    acquire("b2", "b");
    withdrawB1();
    expect(slots.waiting).toBe(3);
    // a holds one after giving one back, b none: b's request goes before a's two earlier ones.
    slots.release("a");
    expect(granted).toEqual(["a1", "a2", "b2"]);
    slots.release("b");
    slots.release("a");
    expect(granted).toEqual(["a1", "a2", "b2", "a3", "a4"]);
    expect(slots.waiting).toBe(0);
  });
});

describe("upstream engine: max_connections", () => {
  /**
   * An upstream that holds every answer until the test lets it go, behind an engine with one
   * connection to it.
   */
  async function startHeldSingleConnection() {
    let letGo = () => {};
    const released = new Promise<void>((resolve) => {
      letGo = resolve;
    });
    const upstream = await startTestMock(async (_request, response) => {
      await released;
      await writeEvents(response, textEvents(["ok"]));
    });
    const engine = createTestEngine({
      model: upstreamModel([upstream.baseUrl]),
      // No timeout ends a held answer: the test does, with `letGo`.
      settings: { maxConnections: 1, maxRetries: 0, firstByteTimeoutMs: 120_000 },
    });
    return { upstream, engine, letGo };
  }

  it("counts requests waiting for a connection as waiting, not running", async () => {
    const { upstream, engine, letGo } = await startHeldSingleConnection();
    const runs = Array.from({ length: 3 }, () => collectParts(engine));
    await expect.poll(() => upstream.requests.length, HANG_GUARD).toBe(1);
    await expect.poll(() => engine.load?.(), HANG_GUARD).toEqual({ running: 1, waiting: 2 });
    letGo();
    await Promise.all(runs);
    expect(engine.load?.()).toEqual({ running: 0, waiting: 0 });
  });

  it("keeps its connection when requests waiting for it are abandoned (regression: each abandoned one closed it)", async () => {
    const { upstream, engine, letGo } = await startHeldSingleConnection();
    const first = collectParts(engine);
    await expect.poll(() => upstream.requests.length, HANG_GUARD).toBe(1);
    // Five clients queue behind it and give up while they wait; one more stays.
    const leave = new AbortController();
    const abandoned = Array.from({ length: 5 }, async () => {
      const prepared = await engine.prepare(chatRequest());
      const parts: StreamPart[] = [];
      for await (const batch of prepared.run(leave.signal)) parts.push(...batch);
      return parts;
    });
    const live = collectParts(engine);
    await expect.poll(() => engine.load?.(), HANG_GUARD).toEqual({ running: 1, waiting: 6 });
    leave.abort();
    for (const parts of await Promise.all(abandoned))
      expect(parts.at(-1)).toMatchObject({ type: "finish", rawReason: "abort" });
    letGo();
    expect((await first).at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    expect((await live).at(-1)).toMatchObject({ type: "finish", reason: "stop" });
    // Only the two that stayed were sent, one after the other on the one connection.
    expect(upstream.requests).toHaveLength(2);
    expect(upstream.requests[1]?.clientPort).toBe(upstream.requests[0]?.clientPort);
  });
});
