import { describe, expect, it } from "vitest";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patchIntegerGrammar } from "../../../src/engine/llama/patch-integer-grammar.ts";

/** The line of `grammar` that defines `rule`. */
function ruleLine(grammar: string, rule: string): string | undefined {
  return grammar.split("\n").find((line) => line.startsWith(`${rule} ::=`));
}

describe("JSON grammars after patchIntegerGrammar", () => {
  it("write integers without fraction or exponent, and other numbers as JSON allows", async () => {
    // Fails when a new node-llama-cpp moves or rewrites the rule: then look at the patch again.
    expect(await patchIntegerGrammar()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({
      type: "object",
      properties: { count: { type: "integer" }, ratio: { type: "number" } },
    });
    expect(ruleLine(grammar.grammar, "integer-number-rule")).toBe(
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})',
    );
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toContain("[eE]");
  });
});
