import { describe, expect, it } from "vitest";
import { decodePageCursor, encodePageCursor } from "../../src/admin/page-cursor.ts";

const cursorOf = (text: string) => Buffer.from(text).toString("base64url");

describe("page cursors", () => {
  it("read back what they were made from", () => {
    const createdAt = new Date("2026-03-01T12:34:56.789Z");
    expect(decodePageCursor(encodePageCursor("accounts", createdAt, "name with spaces"), "accounts")).toEqual(
      {
        createdAt,
        tieBreaker: "name with spaces",
      },
    );
  });

  it("are refused by another listing, saying whose they are (regression: read as a position there)", () => {
    const usage = encodePageCursor("usage", new Date("2026-03-01T12:34:56.789Z"), "row-id");
    expect(() => decodePageCursor(usage, "accounts")).toThrow(
      "after is the next_after of a page of usage, not of accounts: pass the next_after of this listing's last page.",
    );
    expect(decodePageCursor(usage, "usage").tieBreaker).toBe("row-id");
  });

  it("still read a cursor handed out before cursors named their listing", () => {
    expect(decodePageCursor(cursorOf("2026-01-01T00:00:00.000Z acme"), "accounts")).toEqual({
      createdAt: new Date("2026-01-01T00:00:00.000Z"),
      tieBreaker: "acme",
    });
  });

  it.each([
    ["not base64url", "a+b/c="],
    ["no space", cursorOf("2026-01-01T00:00:00.000Z")],
    ["a time not written as handed out", cursorOf("2026-01-01 a")],
    ["a NUL in the text", cursorOf("2026-01-01T00:00:00.000Z a\u0000b")],
    ["a listing and no time", cursorOf("keys a")],
    // Stores compare times as text: these sorted before every row and began the listing again.
    ["a year past 9999", cursorOf("+275760-09-13T00:00:00.000Z a")],
    ["a year before 0000", cursorOf("-271821-04-20T00:00:00.000Z a")],
  ])("are refused when they hold %s", (_case, text) => {
    expect(() => decodePageCursor(text, "keys")).toThrow("after must be the next_after of an earlier page.");
  });
});
