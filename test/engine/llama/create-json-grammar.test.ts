import { describe, expect, it } from "vitest";
import { buildJsonGrammarText } from "../../../src/engine/llama/create-json-grammar.ts";

describe("JSON grammars", () => {
  it("end at the JSON value: node-llama-cpp's trailing newlines are cut from the root rule (pins its grammar text)", async () => {
    const text = await buildJsonGrammarText({
      type: "object",
      properties: { a: { type: "string" } },
      required: ["a"],
    });
    // Undefined would mean a new node-llama-cpp writes its grammars otherwise: the shipped
    // grammar (hidden newlines generated and billed) would be back.
    expect(text).toBeDefined();
    const [root, ...rules] = (text ?? "").split("\n");
    expect(root).toMatch(/^root ::= /);
    expect(root).not.toContain("\\n");
    expect(rules.length).toBeGreaterThan(0);
  });
});
