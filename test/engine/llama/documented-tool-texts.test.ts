import type { Token, Tokenizer } from "node-llama-cpp";
import { describe, expect, it } from "vitest";
import { ContextLengthError } from "../../../src/engine/check-context-length.ts";
import type { ToolDefinition } from "../../../src/engine/engine.ts";
import { checkPromptSize, documentedToolTexts } from "../../../src/engine/llama/check-prompt-size.ts";
import { planGeneration } from "../../../src/engine/llama/plan-generation.ts";
import { createTestRequest } from "./llama-test-support.ts";

/** A tokenizer of one token a character. */
const tokenizer = ((text: string) => Array.from({ length: text.length }, () => 1 as Token)) as Tokenizer;

const pattern = "[a-z]".repeat(20_000);
const lookup: ToolDefinition = {
  name: "lookup",
  description: "Looks a code up.",
  parameters: { type: "object", "x-origin": "catalogue", properties: { code: { type: "string", pattern } } },
};

describe("the tool texts the prompt's size check counts", () => {
  it("of a forced call are its instruction, the keywords the grammar drops included (regression: a 7 MB pattern was not counted)", () => {
    const request = createTestRequest({ tools: [lookup], toolChoice: { type: "function", name: "lookup" } });
    const { instruction, history } = planGeneration(request);
    expect(instruction).toContain(pattern);
    expect(instruction).toContain('"x-origin":"catalogue"');
    // Exactly what the prompt holds: the system message the plan added.
    const system = history[0];
    expect(system?.type === "system" && String(system.text)).toContain(String(instruction));
  });

  it("counts the names and descriptions of tools the functions plan documents (their converted schemas hold no pattern)", () => {
    const request = createTestRequest({ tools: [lookup], toolChoice: { type: "auto" } });
    const { plan } = planGeneration(request);
    if (plan.kind !== "functions") throw new Error(`expected the functions plan, not ${plan.kind}`);
    const texts = documentedToolTexts(
      Object.entries(plan.functions).map(([name, documented]) => ({
        name,
        description: documented.description,
        parameters: documented.params,
      })),
    );
    expect(texts).toEqual(["lookup", "Looks a code up.", "code"]);
  });

  it("refuses, a piece at a time, a forced call whose tool's schema is longer than the context, saying the tools count", async () => {
    const request = createTestRequest({ tools: [lookup], toolChoice: { type: "required" } });
    const { instruction } = planGeneration(request);
    const refusal = await checkPromptSize({
      messages: request.messages,
      tokenizer,
      contextLength: 1024,
      maxTokens: undefined,
      toolTexts: instruction === undefined ? [] : [instruction],
    }).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(ContextLengthError);
    expect((refusal as ContextLengthError).message).toMatch(
      /However, your messages resulted in more than \d+ tokens \(the tools' names, descriptions and parameter schemas count as part of them\)\. Please reduce the length of the messages or tools\.$/,
    );
  });
});
