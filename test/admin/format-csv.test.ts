import { describe, expect, it } from "vitest";
import { formatCsv } from "../../src/admin/format-csv.ts";

describe("formatCsv", () => {
  it("writes a header and rows, quoting only where needed", () => {
    expect(
      formatCsv(
        ["a", "b", "c", "d"],
        [
          ["plain", 12, true, null],
          ["with,comma", 'with "quotes"', "line\nbreak", "carriage\rreturn"],
        ],
      ),
    ).toEqual([
      "a,b,c,d",
      "plain,12,true,",
      '"with,comma","with ""quotes""","line\nbreak","carriage\rreturn"',
    ]);
  });

  it("writes only the header when there are no rows", () => {
    expect(formatCsv(["x"], [])).toEqual(["x"]);
  });
});
