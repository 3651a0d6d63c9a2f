import { describe, expect, it } from "vitest";
import { LedgerDamageError } from "../../src/store/sqlite/read-ledger-summary.ts";

describe("LedgerDamageError", () => {
  // Regression: SQLite reports a damaged page as one row of many lines, and the message quoted
  // them all (55 lines for one page of an index).
  it("quotes the first three problems of quick_check's lines and counts the rest, without its heading", () => {
    const row = [
      "*** in database main ***",
      ...Array.from({ length: 54 }, (_, index) => `Tree 21 page 21 cell ${index}: invalid page number`),
    ].join("\n");
    const error = new LedgerDamageError("/data/tollgate.db", [row]);
    expect(error.message).toBe(
      "/data/tollgate.db is damaged (SQLite's quick_check says: Tree 21 page 21 cell 0: invalid page number; Tree 21 page 21 cell 1: invalid page number; Tree 21 page 21 cell 2: invalid page number; and 51 more).",
    );
  });

  it("quotes a few problems whole, as rows or lines", () => {
    expect(new LedgerDamageError("a.db", ["Page 7: never used", "Page 8: never used"]).message).toBe(
      "a.db is damaged (SQLite's quick_check says: Page 7: never used; Page 8: never used).",
    );
  });
});
