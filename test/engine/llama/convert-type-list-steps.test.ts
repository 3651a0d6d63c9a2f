import { describe, expect, it } from "vitest";
import type { ToolDefinition } from "../../../src/engine/engine.ts";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";
import { planGeneration } from "../../../src/engine/llama/plan-generation.ts";
import { AppError } from "../../../src/errors/app-error.ts";
import { createTestRequest } from "./llama-test-support.ts";

const everyType = ["string", "number", "integer", "boolean", "null", "array", "object"];

/** `{type: [all seven], items: ...}` `depth` levels deep. */
function typeListEveryLevel(depth: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "integer" };
  for (let level = 0; level < depth; level++) schema = { type: everyType, items: schema };
  return schema;
}

describe("the steps a type list takes to convert", () => {
  // Regression: a type list counted one step, as one type does, though each type is a branch the
  // conversion's checks walk: 128 tools of 60 levels of seven types (10 KB each, 8,000 steps)
  // took 0.4 to 1 s to convert, even for tool_choice "none", where 24,000 steps of other shapes
  // take a few hundred milliseconds.
  it("counts each type, so the tools' shared budget refuses 64 tools of 60 levels of seven types", () => {
    const tools: ToolDefinition[] = Array.from({ length: 64 }, (_, index) => ({
      name: `t${index}`,
      parameters: { type: "object", properties: { p: typeListEveryLevel(60) } },
    }));
    const refusal = (() => {
      try {
        planGeneration(createTestRequest({ tools, toolChoice: { type: "none" } }));
        return undefined;
      } catch (error) {
        return error;
      }
    })();
    expect(refusal).toBeInstanceOf(AppError);
    expect((refusal as AppError).message).toMatch(/take more than 24000 steps to convert/);
  });

  it("takes a type list in a schema of its own as before", () => {
    const schema = {
      type: "object",
      properties: { p: typeListEveryLevel(20), q: { type: ["string", "null"] } },
    };
    expect(() => convertJsonSchemaToGbnf(schema, { param: "tools[0].function.parameters" })).not.toThrow();
  });
});
