import { PassThrough } from "node:stream";
import { beforeAll, describe, expect, it } from "vitest";
import { type ErrorBody, postTinyChat } from "../../support/test-server.ts";
import { useTestServer } from "../../support/use-test-server.ts";
import { createAlikeBranches, createReferenceChain, createTwoChains } from "./schema-bombs.ts";

/**
 * Schemas of a kilobyte or two whose llama.cpp grammar takes 2^N steps to build (on the event
 * loop: 27 levels held every client 9.8 s, 40 for good) or keeps 2^N parse stacks open while the
 * model writes (each token checked against every one): refused before llama.cpp sees them.
 */
const logs: string[] = [];
const destination = new PassThrough();
destination.on("data", (chunk: Buffer) => logs.push(...chunk.toString("utf8").split("\n")));
const server = useTestServer({ logDestination: destination });

beforeAll(async () => {
  // The model loads on the first request: not what the refusals' times below measure.
  await post({ max_tokens: 1 });
});

function post(body: Record<string, unknown>): Promise<Response> {
  return postTinyChat(server(), body);
}

function format(schema: unknown) {
  return { response_format: { type: "json_schema", json_schema: { name: "x", schema } } };
}

function tools(parameters: unknown, toolChoice: unknown) {
  return {
    tools: [
      { type: "function", function: { name: "other", parameters: { type: "object", properties: {} } } },
      { type: "function", function: { name: "f", parameters } },
    ],
    tool_choice: toolChoice,
  };
}

const stacksMessage =
  /its grammar would keep more than 2000 alternatives open at once|multiplies with every level of nesting/;

describe("schemas whose grammar multiplies llama.cpp's parse stacks", () => {
  it.each([
    [
      "a chain of anyOf of two references, 30 levels",
      format(createReferenceChain(30)),
      "response_format.json_schema.schema",
    ],
    [
      "two chains taking turns under a property, 30 levels",
      format(createTwoChains(30)),
      "response_format.json_schema.schema",
    ],
    [
      "objects that begin alike, 14 levels",
      format(createAlikeBranches(14)),
      "response_format.json_schema.schema",
    ],
    [
      "two chains in a tool's parameters, required",
      tools(createTwoChains(30), "required"),
      "tools[1].function.parameters",
    ],
    [
      "a chain under a tool's property, auto",
      tools(createTwoChains(24), "auto"),
      "tools[1].function.parameters",
    ],
  ])("refuses %s quickly with 400", async (_name, body, param) => {
    const started = performance.now();
    const response = await post(body);
    const { error } = (await response.json()) as ErrorBody;
    expect(response.status).toBe(400);
    expect(error).toMatchObject({ type: "invalid_request_error", code: "invalid_value", param });
    expect(error.message).toMatch(stacksMessage);
    expect(performance.now() - started).toBeLessThan(3000);
  });

  it("still generates ordinary schemas: an expression tree, an enum, objects that differ", async () => {
    const schema = {
      type: "object",
      properties: {
        expression: { $ref: "#/$defs/e" },
        unit: { enum: Array.from({ length: 300 }, (_, index) => `unit${index}`) },
        shape: {
          anyOf: [
            { type: "object", properties: { kind: { const: "circle" }, radius: { type: "number" } } },
            { type: "object", properties: { kind: { const: "square" }, side: { type: "number" } } },
            { type: "null" },
          ],
        },
      },
      required: ["expression", "unit", "shape"],
      $defs: {
        e: {
          anyOf: [
            ...["+", "-"].map((op) => ({
              type: "object",
              properties: { op: { const: op }, left: { $ref: "#/$defs/e" }, right: { $ref: "#/$defs/e" } },
            })),
            { type: "integer" },
          ],
        },
      },
    };
    const response = await post({ ...format(schema), max_tokens: 200 });
    expect(response.status).toBe(200);
    const body = (await response.json()) as { choices: { message: { content: string } }[] };
    expect(body.choices[0]?.message.content.startsWith("{")).toBe(true);
  });

  // Regression: left to llama.cpp, whose refusal went to the server's log as an error (level 50).
  it("refuses a reference to itself with nothing in between without an error line in the log", async () => {
    const response = await post(format({ $ref: "#" }));
    const { error } = (await response.json()) as ErrorBody;
    expect(response.status).toBe(400);
    expect(error).toMatchObject({ code: "invalid_value", param: "response_format.json_schema.schema" });
    expect(error.message).toMatch(/cannot be turned into a grammar .* make every such cycle pass through/);
    // llama.cpp's messages reach the log a moment later, if at all.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(logs.filter((line) => line.includes('"level":50'))).toEqual([]);
  });
});
