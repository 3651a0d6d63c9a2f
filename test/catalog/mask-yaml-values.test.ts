import { describe, expect, it } from "vitest";
import { maskYamlValues } from "../../src/catalog/mask-yaml-values.ts";

describe("maskYamlValues", () => {
  it.each([
    ['api_key: "sk-abc" "x"', 'api_key: "******" "*"'],
    ["  - base_url: http://user:pw@10.0.0.7:8000/v1", `  - base_url: ${"*".repeat(31)}`],
    [
      "pricing: { input_per_million: '0.10', output: 2 }",
      "pricing: { input_per_million: '****', output: * }",
    ],
    [
      'headers: {X-Api-Key: abc, Authorization: "Bearer x\\"y"}',
      'headers: {X-Api-Key: ***, Authorization: "***********"}',
    ],
    ["api_key: 'it''s' # was: sk-old", "api_key: '*****' #************"],
    ["  - id: foo: bar", "  - id: **** ***"],
    ['api_key: "unclosed', 'api_key: "********'],
    ["- [a, b]", "- [*, *]"],
    ["admin_key: sk-admin-secret1:", `admin_key: ${"*".repeat(17)}`],
    ["admin_key: sk-admin: secret2", "admin_key: ********* *******"],
    ["  - { id: a, engine: { type: b } }", "  - { id: *, engine: { type: * } }"],
  ])("masks the values of %j, one character for one", (line, masked) => {
    expect(maskYamlValues(line)).toBe(masked);
    expect(maskYamlValues(line)).toHaveLength(line.length);
  });
});
