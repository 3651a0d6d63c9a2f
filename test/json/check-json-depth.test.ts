import { describe, expect, it } from "vitest";
import { checkJsonShape, exceedsJsonDepth } from "../../src/json/check-json-depth.ts";

const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

describe("exceedsJsonDepth", () => {
  it("counts arrays and objects, not brackets inside strings", () => {
    expect(exceedsJsonDepth(nested(128))).toBe(false);
    expect(exceedsJsonDepth(nested(129))).toBe(true);
    expect(exceedsJsonDepth(`{"a":${nested(127)}}`)).toBe(false);
    expect(exceedsJsonDepth(`{"a":${nested(128)}}`)).toBe(true);
    // Brackets in strings, escaped quotes and backslashes included, are text.
    expect(exceedsJsonDepth(`{"a":"${"[".repeat(500)}\\"${"{".repeat(500)}\\\\"}`)).toBe(false);
    expect(exceedsJsonDepth(`["\\\\",${nested(200)}]`)).toBe(true);
    expect(exceedsJsonDepth('{"model":"m","messages":[{"role":"user","content":"hi"}]}', 3)).toBe(false);
    expect(exceedsJsonDepth('{"model":"m","messages":[{"role":"user","content":"hi"}]}', 2)).toBe(true);
  });
});

describe("checkJsonShape", () => {
  it("counts the arrays and objects in all, not those in strings", () => {
    const body = '{"a":[{},{}],"b":"{[{[{["}';
    expect(checkJsonShape(body, { maxContainers: 4 })).toBeUndefined();
    expect(checkJsonShape(body, { maxContainers: 3 })).toBe("too many");
    expect(checkJsonShape(nested(129), { maxContainers: 1000 })).toBe("too deep");
    expect(checkJsonShape(nested(100), { maxContainers: 99 })).toBe("too many");
  });
});
