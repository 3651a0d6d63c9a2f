import type { Token } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { createStopMatcher } from "../../../src/engine/llama/create-stop-matcher.ts";

/** Token ids, for the penalty's bookkeeping; the matcher only passes them through. */
function tokens(...ids: number[]): Token[] {
  return ids as Token[];
}

function createRecordingMatcher(stops: string[]) {
  const released: string[] = [];
  const matcher = createStopMatcher(stops, (text) => released.push(text));
  return { matcher, released };
}

describe("createStopMatcher", () => {
  it("releases chunks that cannot begin a stop string at once", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    expect(matcher.push("ab", tokens(1))).toBe(false);
    expect(matcher.push("cd", tokens(2, 3))).toBe(false);
    expect(released).toEqual(["ab", "cd"]);
    expect(matcher.heldTokens).toEqual([]);
  });

  it("holds a whole chunk whose end may begin a stop string, and releases it when the stop string does not follow", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    matcher.push("abX", tokens(1, 2));
    matcher.push("Y", tokens(3));
    expect(released).toEqual([]);
    expect(matcher.heldTokens).toEqual(tokens(1, 2, 3));
    matcher.push("q", tokens(4));
    expect(released).toEqual(["abXYq"]);
    expect(matcher.heldTokens).toEqual([]);
  });

  it("releases the text before a stop string that completes, across chunks, and nothing after", () => {
    const { matcher, released } = createRecordingMatcher(["never", "XYZ"]);
    matcher.push("ab", tokens(1));
    matcher.push("cX", tokens(2));
    expect(matcher.push("YZtail", tokens(3))).toBe(true);
    expect(matcher.stopped).toBe(true);
    expect(matcher.push("more", tokens(4))).toBe(true);
    matcher.release();
    expect(released.join("")).toBe("abc");
  });

  it("cuts at the earliest stop string when several complete at once", () => {
    const { matcher, released } = createRecordingMatcher(["cd", "bcde"]);
    expect(matcher.push("abcdef", tokens(1))).toBe(true);
    expect(released).toEqual(["a"]);
  });

  // Regression: LlamaChat dropped text held for a stop string when generation ended otherwise.
  it("releases what it holds when generation ends without a stop", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    matcher.push("abX", tokens(1));
    matcher.release();
    expect(released).toEqual(["abX"]);
    expect(matcher.stopped).toBe(false);
    expect(matcher.heldTokens).toEqual([]);
  });
});
