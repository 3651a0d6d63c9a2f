import { describe, expect, it } from "vitest";
import { convertJsonSchemaToGbnf } from "../../../src/engine/llama/convert-json-schema-to-gbnf.ts";

const param = "response_format.json_schema.schema";

function refusalMessage(schema: unknown): string | undefined {
  try {
    convertJsonSchemaToGbnf(schema, { param });
    return undefined;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

describe("the places a refusal names within merged alternatives", () => {
  // Regression: named in the merged form ('#/anyOf/0/oneOf/0/anyOf/0/...'), not in the client's schema.
  it("names the client's allOf branch that holds the alternatives", () => {
    const allOf = Array.from({ length: 20 }, (_, group) => ({
      anyOf: Array.from({ length: 4 }, (_, index) => ({
        type: "object",
        properties: { [`p${group}_${index}`]: { type: "string" } },
      })),
    }));
    expect(refusalMessage({ allOf })).toMatch(
      new RegExp(`^Invalid JSON Schema in '${param.replaceAll(".", "\\.")}' at '#/allOf/\\d+/anyOf/\\d+': `),
    );
    const message = refusalMessage({
      allOf: [
        { anyOf: [{ type: "string" }, { type: "integer" }] },
        { anyOf: [{ type: "object" }, { type: "boolean" }] },
      ],
    });
    expect(message).toContain("at '#/allOf/0/anyOf/0': no branch of 'oneOf' can match");
    expect(message).toContain("at '#/allOf/0/anyOf/1': no branch of 'oneOf' can match");
  });

  it("names a referenced definition's alternatives where the definition is", () => {
    const message = refusalMessage({
      allOf: [{ $ref: "#/$defs/Choice" }, { anyOf: [{ type: "object" }, { type: "boolean" }] }],
      $defs: { Choice: { anyOf: [{ type: "string" }, { type: "integer" }] } },
    });
    expect(message).toContain("at '#/$defs/Choice/anyOf/0': no branch of 'oneOf' can match");
  });
});
