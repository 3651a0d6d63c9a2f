import { describe, expect, it } from "vitest";
import { linkAbortSignals } from "../../../src/engine/llama/link-abort-signals.ts";

describe("linkAbortSignals", () => {
  it("aborts with the reason of the first source that aborts", () => {
    const first = new AbortController();
    const second = new AbortController();
    const linked = linkAbortSignals([first.signal, second.signal]);
    expect(linked.signal.aborted).toBe(false);
    second.abort("closing");
    first.abort("client left");
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("closing");
  });

  it("starts aborted when a source already is", () => {
    const source = new AbortController();
    source.abort("gone");
    const linked = linkAbortSignals([new AbortController().signal, source.signal]);
    expect(linked.signal.aborted).toBe(true);
    expect(linked.signal.reason).toBe("gone");
    linked.unlink();
  });

  it("no longer follows its sources once unlinked", () => {
    const source = new AbortController();
    const linked = linkAbortSignals([source.signal]);
    linked.unlink();
    source.abort();
    expect(linked.signal.aborted).toBe(false);
  });
});
