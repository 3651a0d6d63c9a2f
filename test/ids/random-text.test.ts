import { describe, expect, it } from "vitest";
import { createRandomText } from "../../src/ids/random-text.ts";

describe("createRandomText", () => {
  it("gives fresh text of the asked length across pool refills", () => {
    const seen = new Set<string>();
    // 2,000 draws of 18 bytes pass through the 4 KiB pool several times.
    for (let index = 0; index < 2000; index++) {
      const text = createRandomText(18, "base64url");
      expect(text).toMatch(/^[A-Za-z0-9_-]{24}$/);
      seen.add(text);
    }
    expect(seen.size).toBe(2000);
    expect(createRandomText(12, "hex")).toMatch(/^[0-9a-f]{24}$/);
  });
});
