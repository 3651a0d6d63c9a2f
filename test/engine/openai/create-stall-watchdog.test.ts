import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createStallWatchdog, type StallKind } from "../../../src/engine/openai/create-stall-watchdog.ts";

describe("createStallWatchdog", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function start() {
    const watchdog = createStallWatchdog({ firstByteMs: 800, idleMs: 400, now: () => Date.now() });
    const stalls: StallKind[] = [];
    const watch = watchdog.watch((kind) => stalls.push(kind));
    return { watchdog, watch, stalls };
  }

  it("reports a first byte that does not come in time, at most a tick late", () => {
    const { watch, stalls } = start();
    vi.advanceTimersByTime(799);
    expect(stalls).toEqual([]);
    vi.advanceTimersByTime(50);
    expect(stalls).toEqual(["first-byte"]);
    expect(watch.stalled).toBe("first-byte");
    vi.advanceTimersByTime(5_000);
    expect(stalls).toEqual(["first-byte"]);
  });

  it("switches to the idle wait after the first byte, restarted by every touch", () => {
    const { watch, stalls } = start();
    vi.advanceTimersByTime(700);
    watch.touch();
    vi.advanceTimersByTime(350);
    watch.touch();
    vi.advanceTimersByTime(350);
    expect(stalls).toEqual([]);
    vi.advanceTimersByTime(100);
    expect(stalls).toEqual(["idle"]);
  });

  it("counts silence only while the reader waits, from when it began to wait", () => {
    const { watch, stalls } = start();
    watch.touch();
    // The reader took what came and is busy (a slow client): the upstream is not silent.
    watch.setWaiting(false);
    vi.advanceTimersByTime(5_000);
    expect(stalls).toEqual([]);
    watch.setWaiting(true);
    vi.advanceTimersByTime(350);
    expect(stalls).toEqual([]);
    vi.advanceTimersByTime(100);
    expect(stalls).toEqual(["idle"]);
  });

  it("does not count a time the process did not run as silence (regression: stopped for 74 s, every stream failed as silent)", () => {
    const { watch, stalls } = start();
    watch.touch();
    vi.advanceTimersByTime(300);
    // Stopped (SIGSTOP, a suspended machine) for 75 s: the clock moves, no timer runs.
    vi.setSystemTime(Date.now() + 75_000);
    vi.advanceTimersByTime(50);
    expect(stalls).toEqual([]);
    // What came meanwhile is read after the tick; silence counts again from where it was.
    vi.advanceTimersByTime(49);
    expect(stalls).toEqual([]);
    vi.advanceTimersByTime(100);
    expect(stalls).toEqual(["idle"]);
  });

  it("watches many responses with one timer, and stops it when none is left", () => {
    const { watchdog, watch, stalls } = start();
    const other: StallKind[] = [];
    const second = watchdog.watch((kind) => other.push(kind));
    second.touch();
    expect(vi.getTimerCount()).toBe(1);
    watch.stop();
    vi.advanceTimersByTime(450);
    expect(stalls).toEqual([]);
    expect(other).toEqual(["idle"]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
