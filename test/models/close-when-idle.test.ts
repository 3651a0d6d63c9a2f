import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { ChatEngine } from "../../src/engine/engine.ts";
import { closeWhenIdle, IDLE_CHECK_MS, MAX_RETIREMENT_MS } from "../../src/models/close-when-idle.ts";

/** An engine that only counts its closes and reports `load` (or nothing, when undefined). */
function retiredEngine(load: (() => { running: number; waiting: number }) | undefined) {
  const engine = {
    closed: 0,
    close: async () => void engine.closed++,
    ...(load === undefined ? {} : { load }),
  };
  return engine;
}

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  vi.useRealTimers();
});

describe("closing a replaced engine", () => {
  it("waits for a request that runs longer than the retirement bound (regression: cut after 15 minutes)", async () => {
    let running = 1;
    const engine = retiredEngine(() => ({ running, waiting: 0 }));
    closeWhenIdle(engine as unknown as ChatEngine, { isHeld: () => false, onError: () => {} });
    await vi.advanceTimersByTimeAsync(MAX_RETIREMENT_MS + 60_000);
    expect(engine.closed).toBe(0);
    running = 0;
    await vi.advanceTimersByTimeAsync(IDLE_CHECK_MS);
    expect(engine.closed).toBe(1);
  });

  it("waits while a request holds it between the engine's steps", async () => {
    let held = true;
    const engine = retiredEngine(() => ({ running: 0, waiting: 0 }));
    closeWhenIdle(engine as unknown as ChatEngine, { isHeld: () => held, onError: () => {} });
    await vi.advanceTimersByTimeAsync(10 * IDLE_CHECK_MS);
    expect(engine.closed).toBe(0);
    held = false;
    await vi.advanceTimersByTimeAsync(IDLE_CHECK_MS);
    expect(engine.closed).toBe(1);
  });

  it("says once it has closed, so that the model's load stops counting it", async () => {
    let running = 1;
    const engine = retiredEngine(() => ({ running, waiting: 0 }));
    const closed = vi.fn();
    closeWhenIdle(engine as unknown as ChatEngine, {
      isHeld: () => false,
      onError: () => {},
      onClosed: closed,
    });
    await vi.advanceTimersByTimeAsync(IDLE_CHECK_MS);
    expect(closed).not.toHaveBeenCalled();
    running = 0;
    await vi.advanceTimersByTimeAsync(IDLE_CHECK_MS);
    expect(closed).toHaveBeenCalledOnce();
  });

  it("closes one that cannot report its load after the retirement bound", async () => {
    const engine = retiredEngine(undefined);
    closeWhenIdle(engine as unknown as ChatEngine, { isHeld: () => false, onError: () => {} });
    await vi.advanceTimersByTimeAsync(MAX_RETIREMENT_MS - IDLE_CHECK_MS);
    expect(engine.closed).toBe(0);
    await vi.advanceTimersByTimeAsync(2 * IDLE_CHECK_MS);
    expect(engine.closed).toBe(1);
  });

  it("retires the engine at once, so that what waits for it may move to the new one", async () => {
    const retire = vi.fn();
    const engine = { ...retiredEngine(() => ({ running: 1, waiting: 1 })), retire };
    closeWhenIdle(engine as unknown as ChatEngine, { isHeld: () => false, onError: () => {} });
    expect(retire).toHaveBeenCalledOnce();
    await vi.advanceTimersByTimeAsync(IDLE_CHECK_MS);
    expect(retire).toHaveBeenCalledOnce();
    expect(engine.closed).toBe(0);
  });
});
