import { describe, expect, it } from "vitest";
import { postTinyChat } from "../../support/test-server.ts";
import { type ChatCompletionBody, useTestServer } from "../../support/use-test-server.ts";

/** Bounds of several `allOf` branches, and an `enum` beside a `maximum`: the stricter of each holds. */
const schema = {
  type: "object",
  properties: {
    above5: { type: "integer", allOf: [{ exclusiveMinimum: 1 }, { exclusiveMinimum: 5 }, { maximum: 9 }] },
    draft4: {
      type: "integer",
      allOf: [{ minimum: 3, exclusiveMinimum: true }, { minimum: 5 }, { maximum: 6 }],
    },
    pick: { type: "integer", enum: [1, 5, 10], maximum: 6 },
  },
  required: ["above5", "draft4", "pick"],
  additionalProperties: false,
};

const server = useTestServer();

describe("merged number bounds and enum values on the tiny model, over HTTP", () => {
  it("answer only values within the stricter bounds (regression: 2 to 5 for > 1 and > 5, 10 beside maximum 6)", async () => {
    for (const seed of [1, 2, 3]) {
      const response = await postTinyChat(
        server(),
        { seed, response_format: { type: "json_schema", json_schema: { name: "n", strict: true, schema } } },
        60,
      );
      expect(response.status).toBe(200);
      const body = (await response.json()) as ChatCompletionBody;
      const content = body.choices[0]?.message.content ?? "";
      expect(body.choices[0]?.finish_reason, `seed ${seed}: ${content}`).toBe("stop");
      const value = JSON.parse(content) as { above5: number; draft4: number; pick: number };
      expect(value.above5 > 5 && value.above5 <= 9, `seed ${seed}: ${content}`).toBe(true);
      expect([5, 6], `seed ${seed}: ${content}`).toContain(value.draft4);
      expect([1, 5], `seed ${seed}: ${content}`).toContain(value.pick);
    }
  });

  it("answers 400 invalid_value naming the param for an enum with no value within its bounds", async () => {
    const response = await postTinyChat(server(), {
      tools: [
        {
          type: "function",
          function: { name: "f", parameters: { properties: { n: { enum: [10, 20], maximum: 6 } } } },
        },
      ],
    });
    const error = ((await response.json()) as { error: Record<string, unknown> }).error;
    expect(response.status).toBe(400);
    expect(error).toMatchObject({ code: "invalid_value", param: "tools[0].function.parameters" });
    expect(error.message).toMatch(/at '#\/properties\/n': no value of 'enum' meets the keywords beside it/);
  });
});
