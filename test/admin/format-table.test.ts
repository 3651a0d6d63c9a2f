import { describe, expect, it, vi } from "vitest";
import { displayWidth } from "../../src/admin/display-width.ts";
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

describe("a table of names wider or narrower than their length", () => {
  it("pads by the columns a terminal draws: CJK and emoji two, accents none", () => {
    const lines = formatTable(
      ["NAME", "N"],
      [
        ["中文中文", "1"],
        ["e\u0301e\u0301", "2"],
        ["😀😀", "3"],
        ["👨‍👩‍👧", "4"],
        ["ascii", "5"],
      ],
    );
    expect(lines).toEqual([
      "NAME      N",
      "中文中文  1",
      "e\u0301e\u0301        2",
      "😀😀      3",
      "👨‍👩‍👧        4",
      "ascii     5",
    ]);
  });
});

describe("displayWidth", () => {
  it("counts columns, not UTF-16 units", () => {
    expect(displayWidth("abc")).toBe(3);
    expect(displayWidth("모델")).toBe(4);
    expect(displayWidth("ｆｕｌｌ")).toBe(8);
    expect(displayWidth("😀")).toBe(2);
    expect(displayWidth("❤️")).toBe(2);
    expect(displayWidth("a\u200bb")).toBe(2);
    expect(displayWidth("模型/😀:q4")).toBe(10);
  });
});

describe("display-width.ts on loading", () => {
  // A server loads it (through the admin routes), and an Intl.Segmenter costs 2.6 MB of RSS:
  // SPEC section 10 bounds idle RSS at 150 MB.
  it("makes its grapheme segmenter only when a width needs it", async () => {
    vi.resetModules();
    const made = vi.spyOn(Intl, "Segmenter");
    try {
      const { displayWidth: fresh } = await import("../../src/admin/display-width.ts");
      expect(made).not.toHaveBeenCalled();
      expect(fresh("ascii")).toBe(5);
      expect(made).not.toHaveBeenCalled();
      expect(fresh("中")).toBe(2);
      expect(made).toHaveBeenCalledTimes(1);
    } finally {
      made.mockRestore();
    }
  });
});
