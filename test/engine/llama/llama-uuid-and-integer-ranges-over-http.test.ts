import { describe, expect, it } from "vitest";
import { postTinyChat } from "../../support/test-server.ts";
import { type ChatCompletionBody, useTestServer } from "../../support/use-test-server.ts";

/**
 * What zod writes for `z.object({ id: z.string().uuid(), rating: z.number().int().min(1).max(10),
 * ... })`, as the openai SDK's `.parse()` and the AI SDK's `generateObject` send it: the tiny
 * model's answer must pass the same checks the client library runs on it.
 */
const zodSchema = {
  type: "object",
  properties: {
    id: { type: "string", format: "uuid" },
    rating: { type: "integer", minimum: 1, maximum: 10 },
    percent: { type: "integer", minimum: 0, maximum: 100 },
    offset: { type: "integer", minimum: -50, maximum: 50 },
    count: { type: "integer", exclusiveMinimum: 0, maximum: 1000000 },
    parent: { anyOf: [{ type: "string", format: "uuid" }, { type: "null" }] },
  },
  required: ["id", "rating", "percent", "offset", "count", "parent"],
  additionalProperties: false,
};

/** zod 4's z.uuid(): a version of 1 to 8, the RFC variant (lowercase is what the grammar writes). */
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[1-8][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/** What of `value` breaks `zodSchema` (as zod would refuse it): nothing for a valid answer. */
function problems(value: Record<string, unknown>): string[] {
  const found: string[] = [];
  const integer = (name: string, low: number, high: number) => {
    const number = value[name];
    if (!Number.isInteger(number) || (number as number) < low || (number as number) > high)
      found.push(`${name}: ${JSON.stringify(number)}`);
  };
  if (typeof value.id !== "string" || !UUID.test(value.id)) found.push(`id: ${JSON.stringify(value.id)}`);
  integer("rating", 1, 10);
  integer("percent", 0, 100);
  integer("offset", -50, 50);
  integer("count", 1, 1000000);
  if (value.parent !== null && (typeof value.parent !== "string" || !UUID.test(value.parent)))
    found.push(`parent: ${JSON.stringify(value.parent)}`);
  return found;
}

const server = useTestServer();

describe("format uuid and integer ranges on the tiny model, over HTTP", () => {
  it("answer json_schema output that the client's zod schema accepts, over several seeds (regression: 4 of 4 failed)", async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const response = await postTinyChat(
        server(),
        {
          seed,
          response_format: {
            type: "json_schema",
            json_schema: { name: "item", strict: true, schema: zodSchema },
          },
        },
        400,
      );
      expect(response.status).toBe(200);
      const body = (await response.json()) as ChatCompletionBody;
      const choice = body.choices[0];
      expect(choice?.finish_reason, `seed ${seed}`).toBe("stop");
      const value = JSON.parse(choice?.message.content ?? "") as Record<string, unknown>;
      expect(problems(value), `seed ${seed}: ${choice?.message.content}`).toEqual([]);
    }
  });

  it("answer fractional numbers within their bounds, as zod's .min().max() checks them (regression: any number)", async () => {
    const bounded = {
      type: "object",
      properties: {
        confidence: { type: "number", minimum: 0, maximum: 1 },
        celsius: { type: "number", minimum: -40, exclusiveMaximum: 60.5 },
        price: { type: "number", exclusiveMinimum: 0 },
      },
      required: ["confidence", "celsius", "price"],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const response = await postTinyChat(
        server(),
        { seed, response_format: { type: "json_schema", json_schema: { name: "reading", schema: bounded } } },
        200,
      );
      expect(response.status).toBe(200);
      const content = ((await response.json()) as ChatCompletionBody).choices[0]?.message.content ?? "";
      const {
        confidence = Number.NaN,
        celsius = Number.NaN,
        price = Number.NaN,
      } = JSON.parse(content) as Record<string, number>;
      const wrong = [
        confidence >= 0 && confidence <= 1 ? [] : ["confidence"],
        celsius >= -40 && celsius < 60.5 ? [] : ["celsius"],
        price > 0 ? [] : ["price"],
      ].flat();
      expect(wrong, `seed ${seed}: ${content}`).toEqual([]);
    }
  });

  it("shape a forced tool call's arguments likewise", async () => {
    for (const seed of [1, 2, 3]) {
      const response = await postTinyChat(
        server(),
        {
          seed,
          tools: [{ type: "function", function: { name: "save", parameters: zodSchema } }],
          tool_choice: { type: "function", function: { name: "save" } },
        },
        400,
      );
      expect(response.status).toBe(200);
      const body = (await response.json()) as ChatCompletionBody;
      const call = body.choices[0]?.message.tool_calls?.[0];
      const value = JSON.parse(call?.function.arguments ?? "") as Record<string, unknown>;
      expect(problems(value), `seed ${seed}: ${call?.function.arguments}`).toEqual([]);
    }
  });
});
