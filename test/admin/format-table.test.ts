import { describe, expect, it } from "vitest";
import { createTableLayout, formatTable } from "../../src/admin/format-table.ts";

describe("formatTable", () => {
  it("pads every column to its widest cell, two spaces apart, without trailing spaces", () => {
    expect(
      formatTable(
        ["ID", "NAME"],
        [
          ["1", "alpha"],
          ["22", ""],
        ],
      ),
    ).toEqual(["ID  NAME", "1   alpha", "22"]);
  });
});

describe("createTableLayout", () => {
  it("sends the header with the first page and widens a column when a later page needs it", () => {
    const layout = createTableLayout(["A", "B"]);
    expect(layout([["xx", "1"]])).toEqual(["A   B", "xx  1"]);
    expect(layout([["y", "2"]])).toEqual(["y   2"]);
    expect(
      layout([
        ["zzzz", "3"],
        ["w", "4"],
      ]),
    ).toEqual(["zzzz  3", "w     4"]);
    expect(layout([])).toEqual([]);
  });
});
