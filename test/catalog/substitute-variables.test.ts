// biome-ignore-all lint/suspicious/noTemplateCurlyInString: ${VAR} references are the subject of these tests.
import { describe, expect, it } from "vitest";
import { ConfigIssues } from "../../src/catalog/config-fields.ts";
import { substituteVariables } from "../../src/catalog/substitute-variables.ts";

function substitute(value: unknown, env: NodeJS.ProcessEnv) {
  const issues = new ConfigIssues();
  const result = substituteVariables(value, { env, issues, mayBeUnset: (path) => path[0] === "optional" });
  return { result, problems: issues.list.map((issue) => `${issue.field}: ${issue.message}`) };
}

describe("substituteVariables", () => {
  it("replaces references in nested strings and leaves other values alone", () => {
    const tree = { a: "${X}", list: [1, "x=${X}, y=${Y}", true, null], nested: { b: "plain $ and } text" } };
    expect(substitute(tree, { X: "1", Y: "two" })).toEqual({
      result: { a: "1", list: [1, "x=1, y=two", true, null], nested: { b: "plain $ and } text" } },
      problems: [],
    });
  });

  it("does not substitute inside substituted values", () => {
    expect(substitute({ a: "${X}" }, { X: "${Y}", Y: "no" }).result).toEqual({ a: "${Y}" });
  });

  it("names the field and variable when it is not set, except where unset is allowed", () => {
    expect(substitute({ list: ["${MISSING}"], optional: "${MISSING}" }, {})).toEqual({
      result: { list: [""], optional: "" },
      problems: [
        "list[0]: environment variable MISSING is not set; set it (a running server sees only the environment it started with: restart it), or write the value in the file",
      ],
    });
  });

  it("writes $${ as a literal ${", () => {
    expect(substitute({ a: "$${X} ${X}" }, { X: "1" }).result).toEqual({ a: "${X} 1" });
  });
});
