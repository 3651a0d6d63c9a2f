import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { createOpenApiDocument } from "../../src/api/create-openapi-document.ts";

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1", async () => {
    const validator = new Validator();
    const result = await validator.validate(createOpenApiDocument({ version: "1.0.0" }));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("is checked by a validator that does reject broken documents", async () => {
    const broken = {
      ...createOpenApiDocument({ version: "1.0.0" }),
      paths: { "/x": { get: { responses: 5 } } },
    };
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it("describes the request with the schema that validates it", () => {
    const document = createOpenApiDocument({ version: "1.0.0" }) as {
      components: {
        schemas: Record<string, { properties: Record<string, { minimum?: number; maximum?: number }> }>;
      };
    };
    const request = document.components.schemas.ChatCompletionRequest!;
    expect(request.properties.temperature).toMatchObject({ minimum: 0, maximum: 2 });
    expect(Object.keys(request.properties)).toEqual(
      expect.arrayContaining([
        "model",
        "messages",
        "stream",
        "tools",
        "tool_choice",
        "response_format",
        "seed",
        "user",
      ]),
    );
  });
});
