import { describe, expect, it } from "vitest";
import { createGrammarCache } from "../../../src/engine/llama/create-grammar-cache.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";

/** The line of `grammar` that defines `rule`. */
function ruleLine(grammar: string, rule: string): string | undefined {
  return grammar.split("\n").find((line) => line.startsWith(`${rule} ::=`));
}

describe("JSON-schema grammars", () => {
  it("write integers without fraction or exponent, and other numbers as JSON allows", async () => {
    const grammars = createGrammarCache({ llama: await getSharedLlama({ gpu: false }) });
    const grammar = await grammars.get({
      type: "object",
      properties: { count: { type: "integer" }, ratio: { type: "number" } },
    });
    expect(ruleLine(grammar.grammar, "integer-number-rule")).toBe(
      'integer-number-rule ::= "-"? ("0" | [1-9] [0-9]{0,15})',
    );
    expect(ruleLine(grammar.grammar, "fractional-number-rule")).toContain("[eE]");
    // Built like node-llama-cpp's own: output ends at the blank lines after the value.
    expect(grammar.trimWhitespaceSuffix).toBe(true);
    expect(grammar.stopGenerationTriggers).toHaveLength(1);
  });

  it("compiles a schema once", async () => {
    const grammars = createGrammarCache({ llama: await getSharedLlama({ gpu: false }) });
    const schema = { type: "array", items: { type: "integer" } } as const;
    const first = await grammars.get(schema);
    expect(await grammars.get({ ...schema })).toBe(first);
  });
});
