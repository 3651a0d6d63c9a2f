import { describe, expect, it } from "vitest";
import { createGrammarCache } from "../../../src/engine/llama/create-grammar-cache.ts";
import { getSharedLlama } from "../../../src/engine/llama/get-shared-llama.ts";

describe("the grammar cache", () => {
  it("compiles a schema once, and the same schema sent again gets the same grammar", async () => {
    const grammars = createGrammarCache({ llama: await getSharedLlama({ gpu: false }) });
    const schema = { type: "array", items: { type: "integer" } } as const;
    const first = await grammars.get(schema);
    expect(await grammars.get({ ...schema })).toBe(first);
    expect(await grammars.get({ type: "array", items: { type: "string" } })).not.toBe(first);
  });
});
