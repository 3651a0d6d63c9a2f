import { describe, expect, it } from "vitest";
import { formatCsvLine } from "../../src/admin/format-csv.ts";

describe("formatCsvLine", () => {
  it("writes cells, quoting only where needed", () => {
    expect(formatCsvLine(["a", "b", "c", "d"])).toBe("a,b,c,d");
    expect(formatCsvLine(["plain", 12, true, null])).toBe("plain,12,true,");
    expect(formatCsvLine(["with,comma", 'with "quotes"', "line\nbreak", "carriage\rreturn"])).toBe(
      '"with,comma","with ""quotes""","line\nbreak","carriage\rreturn"',
    );
  });
});
