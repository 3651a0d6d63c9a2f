import { describe, expect, it } from "vitest";
import { postTinyChat, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

/**
 * The strings of a request's JSON Schemas are bounded at the edge, as OpenAI's structured outputs
 * bound them, for every model: an enum of one string of megabytes, or such a property name, took
 * seconds of a local grammar's building on the event loop, and went upstream unchecked.
 */
const server = useTestServer();

async function post(body: Record<string, unknown>) {
  const response = await postTinyChat(server(), body, 2);
  return { status: response.status, body: (await response.json()) as { error?: Record<string, unknown> } };
}

const format = (schema: Record<string, unknown>) => ({
  response_format: { type: "json_schema", json_schema: { name: "answer", schema } },
});

describe("schema string bounds over HTTP", () => {
  it("refuses names and constants of more than 120,000 characters, naming the field, for any model", async () => {
    const long = "x".repeat(200_000);
    for (const model of [TINY_MODEL, "no-such-model"]) {
      const enumValue = await post({
        model,
        ...format({ type: "object", properties: { a: { enum: [long] } } }),
      });
      expect(enumValue.status).toBe(400);
      expect(enumValue.body.error).toMatchObject({
        type: "invalid_request_error",
        code: "invalid_value",
        param: "response_format.json_schema.schema",
      });
      expect(enumValue.body.error?.message).toMatch(/more than 120000 characters in all/);
    }
    const propertyName = await post({
      tools: [
        {
          type: "function",
          function: { name: "f", parameters: { type: "object", properties: { [long]: {} } } },
        },
      ],
    });
    expect(propertyName.status).toBe(400);
    expect(propertyName.body.error).toMatchObject({
      code: "invalid_value",
      param: "tools[0].function.parameters",
    });
  });

  it("refuses a json_schema name other than letters, digits, _ and -, as it refuses such a tool name", async () => {
    const response = await post({
      response_format: {
        type: "json_schema",
        json_schema: { name: "has space!", schema: { type: "object" } },
      },
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({ param: "response_format.json_schema.name" });
    expect(
      (await post({ response_format: { type: "json_schema", json_schema: { name: "a-B_9" } } })).status,
    ).toBe(200);
  });

  it("refuses a schema whose JSON nests deeper than 64 levels, for any model, saying what a level is", async () => {
    // 31 objects nested in each other's properties: 62 levels; 32 of them: 64, and a leaf past it.
    const nested = (levels: number): Record<string, unknown> =>
      levels === 0 ? { type: "string" } : { type: "object", properties: { a: nested(levels - 1) } };
    const deep = await post({ model: "no-such-model", ...format(nested(32)) });
    expect(deep.status).toBe(400);
    expect(deep.body.error).toMatchObject({
      code: "invalid_value",
      param: "response_format.json_schema.schema",
    });
    expect(deep.body.error?.message).toBe(
      "Invalid value for 'response_format.json_schema.schema': its JSON nests deeper than 64 levels of objects and arrays (a property nested in another takes two: its 'properties' and itself).",
    );
    const within = await post({ model: "no-such-model", ...format(nested(31)) });
    expect(within.body.error).toMatchObject({ code: "model_not_found" });
  });

  it("takes a schema within the bounds on a local model", async () => {
    const response = await post(
      format({ type: "object", properties: { a: { enum: ["x".repeat(119_000)] } } }),
    );
    expect(response.status).toBe(200);
  });

  it("bounds what a local model's tool prompt and grammar spell out, descriptions included", async () => {
    const description = "d ".repeat(300_000);
    const response = await post({
      tools: [
        {
          type: "function",
          function: {
            name: "f",
            parameters: { type: "object", properties: { a: { type: "string", description } } },
          },
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(response.body.error).toMatchObject({
      code: "invalid_value",
      param: "tools[0].function.parameters",
    });
    expect(response.body.error?.message).toMatch(
      /more than 500000 characters of property names, constants and descriptions/,
    );
  });
});
