import { getHeapSpaceStatistics } from "node:v8";
import { describe, expect, it } from "vitest";
import { releaseUnusedMemory } from "../../src/process/release-unused-memory.ts";

/** The young generation's resident bytes. */
function youngGenerationBytes(): number {
  const space = getHeapSpaceStatistics().find((entry) => entry.space_name === "new_space");
  if (space === undefined) throw new Error("V8 reports no new_space");
  return space.physical_space_size;
}

describe("releasing the memory V8 keeps after a burst", () => {
  it("shrinks the young generation that a burst of allocation grew", () => {
    // As a start does: much allocated, much of it surviving a few collections, then dropped.
    let kept: unknown[][] = [];
    for (let round = 0; round < 200; round++) {
      kept.push(Array.from({ length: 2_000 }, (_, index) => ({ round, index, text: `item ${index}` })));
      if (kept.length > 40) kept = kept.slice(20);
    }
    kept = [];
    const before = youngGenerationBytes();
    expect(before).toBeGreaterThan(8 * 1024 * 1024);

    releaseUnusedMemory();

    expect(youngGenerationBytes()).toBeLessThan(before / 4);
  });
});
