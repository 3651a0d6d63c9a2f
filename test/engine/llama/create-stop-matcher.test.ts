import { describe, expect, it } from "vitest";
import { createStopMatcher } from "../../../src/engine/llama/create-stop-matcher.ts";

function createRecordingMatcher(stops: string[]) {
  const released: string[] = [];
  const matcher = createStopMatcher(stops, (text) => released.push(text));
  return { matcher, released };
}

describe("createStopMatcher", () => {
  it("releases chunks that cannot begin a stop string at once", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    expect(matcher.push("ab")).toBe(false);
    expect(matcher.push("cd")).toBe(false);
    expect(released).toEqual(["ab", "cd"]);
  });

  it("holds a whole chunk whose end may begin a stop string, and releases it when the stop string does not follow", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    matcher.push("abX");
    matcher.push("Y");
    expect(released).toEqual([]);
    matcher.push("q");
    expect(released).toEqual(["abXYq"]);
  });

  it("releases the text before a stop string that completes, across chunks, and nothing after", () => {
    const { matcher, released } = createRecordingMatcher(["never", "XYZ"]);
    matcher.push("ab");
    matcher.push("cX");
    expect(matcher.push("YZtail")).toBe(true);
    expect(matcher.stopped).toBe(true);
    expect(matcher.push("more")).toBe(true);
    matcher.release();
    expect(released.join("")).toBe("abc");
  });

  it("cuts at the earliest stop string when several complete at once", () => {
    const { matcher, released } = createRecordingMatcher(["cd", "bcde"]);
    expect(matcher.push("abcdef")).toBe(true);
    expect(released).toEqual(["a"]);
  });

  // Regression: LlamaChat dropped text held for a stop string when generation ended otherwise.
  it("releases what it holds when generation ends without a stop", () => {
    const { matcher, released } = createRecordingMatcher(["XYZ"]);
    matcher.push("abX");
    matcher.release();
    expect(released).toEqual(["abX"]);
    expect(matcher.stopped).toBe(false);
  });
});
