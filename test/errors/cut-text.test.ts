import { describe, expect, it } from "vitest";
import { cutText, cutTextKeepingEnd, shortenText } from "../../src/errors/cut-text.ts";

const emoji = "😀"; // two UTF-16 units: \ud83d\ude00

describe("cutText", () => {
  it("keeps a text that fits whole", () => {
    expect(cutText("abc", 3)).toBe("abc");
    expect(cutText(`a${emoji}`, 3)).toBe(`a${emoji}`);
    expect(cutText("", 0)).toBe("");
  });

  it("cuts at the given number of code units", () => {
    expect(cutText("abcdef", 4)).toBe("abcd");
    expect(cutText(`${emoji}${emoji}`, 2)).toBe(emoji);
    expect(cutText("abc", 0)).toBe("");
  });

  it("drops the first half of a surrogate pair the cut would split, never leaving a lone surrogate", () => {
    expect(cutText(`ab${emoji}cd`, 3)).toBe("ab");
    expect(cutText(`${emoji}`, 1)).toBe("");
    const cut = cutText(`${"a".repeat(298)}${emoji}...`, 299);
    expect(cut).toBe("a".repeat(298));
    expect(cut.isWellFormed()).toBe(true);
  });

  it("cuts a text of emoji anywhere into a well-formed text", () => {
    const text = `x${emoji.repeat(10)}`;
    for (let units = 0; units <= text.length; units++) {
      const cut = cutText(text, units);
      expect(cut.isWellFormed()).toBe(true);
      expect(cut.length).toBeLessThanOrEqual(units);
      expect(cut.length).toBeGreaterThanOrEqual(units - 1);
      expect(text.startsWith(cut)).toBe(true);
    }
  });
});

describe("cutTextKeepingEnd", () => {
  it("keeps a text that fits whole and otherwise its last code units", () => {
    expect(cutTextKeepingEnd("abc", 3)).toBe("abc");
    expect(cutTextKeepingEnd("abcdef", 2)).toBe("ef");
    expect(cutTextKeepingEnd("abc", 0)).toBe("");
  });

  it("drops the second half of a surrogate pair the cut would split", () => {
    expect(cutTextKeepingEnd(`ab${emoji}cd`, 3)).toBe("cd");
    expect(cutTextKeepingEnd(`ab${emoji}cd`, 4)).toBe(`${emoji}cd`);
    const text = `${emoji.repeat(10)}x`;
    for (let units = 0; units <= text.length; units++) {
      const cut = cutTextKeepingEnd(text, units);
      expect(cut.isWellFormed()).toBe(true);
      expect(cut.length).toBeGreaterThanOrEqual(units - 1);
      expect(text.endsWith(cut)).toBe(true);
    }
  });
});

describe("shortenText", () => {
  it("keeps a text of at most the length whole, and cuts a longer one to that length with ...", () => {
    expect(shortenText("x".repeat(80))).toBe("x".repeat(80));
    expect(shortenText("x".repeat(100_000))).toBe(`${"x".repeat(77)}...`);
    expect(shortenText("abcdef", 5)).toBe("ab...");
    expect(shortenText(`a${emoji}bcd`, 5)).toBe("a...");
  });
});
