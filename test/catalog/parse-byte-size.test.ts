import { describe, expect, it } from "vitest";
import { parseByteSize } from "../../src/catalog/parse-byte-size.ts";

describe("parseByteSize", () => {
  it.each<[string | number, number]>([
    ["8mb", 8_388_608],
    ["8MB", 8_388_608],
    ["8 mb", 8_388_608],
    ["512kb", 524_288],
    ["2gb", 2_147_483_648],
    ["1b", 1],
    ["1000", 1000],
    [4096, 4096],
  ])("reads %j as %d bytes", (input, bytes) => {
    expect(parseByteSize(input)).toBe(bytes);
  });

  it.each<string | number>([
    "",
    "0",
    0,
    -1,
    1.5,
    "1.5mb",
    "8 megs",
    "mb",
    "-1kb",
    "1tb",
    "99999999999999999gb",
  ])("refuses %j", (input) => {
    expect(parseByteSize(input)).toBeUndefined();
  });
});
