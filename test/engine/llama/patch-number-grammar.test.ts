import { describe, expect, it } from "vitest";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";
import { patchNumberGrammar } from "../../../src/engine/llama/patch-number-grammar.ts";

/** The line of `grammar` that defines `rule`. */
function ruleLine(grammar: string, rule: string): string | undefined {
  return grammar.split("\n").find((line) => line.startsWith(`${rule} ::=`));
}

describe("JSON grammars after patchNumberGrammar", () => {
  it("write safe integers and finite numbers: at most 15 integer digits, exponents of at most 2 digits", async () => {
    // Fails when a new node-llama-cpp moves or rewrites the rules: then look at the patch again.
    expect(await patchNumberGrammar()).toBe(true);
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({
      type: "object",
      properties: { count: { type: "integer" }, ratio: { type: "number" } },
    });
    expect(ruleLine(grammar.grammar, "integer-number-rule")).toBe(
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,14})',
    );
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toBe(
      'fractional-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? ("0" | [1-9] [0-9]?))?',
    );
    // The largest numbers the rules allow.
    expect(Number.isSafeInteger(JSON.parse("-999999999999999"))).toBe(true);
    expect(Number.isFinite(JSON.parse("9999999999999999.9999999999999999e+99"))).toBe(true);
  });

  it("bounds the numbers of the any-JSON-value rule too (json_object, parameters without a schema)", async () => {
    await patchNumberGrammar();
    const llama = await getSharedLlama({ gpu: false });
    const grammar = await llama.createGrammarForJsonSchema({ type: "object", additionalProperties: true });
    expect(grammar.grammar).not.toContain("{0,15}))?");
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toContain('("0" | [1-9] [0-9]?))?');
  });
});
