import { Ajv2020 } from "ajv/dist/2020.js";
import { describe, expect, it } from "vitest";
import { TINY_MODEL } from "../../support/test-server.ts";
import { type ChatCompletionBody, useTestServer } from "../../support/use-test-server.ts";

/**
 * What a local model writes under `anyOf` and `format` lengths, checked by a JSON Schema validator
 * against the schema the client sent: the grammar must only allow values that schema takes.
 */
const server = useTestServer();

/** Formats asserted as a grammar writes them (ajv-formats' own checks, without the package). */
const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: true })
  .addFormat("date", /^\d{4}-\d{2}-\d{2}$/)
  .addFormat("time", /^\d{2}:\d{2}:\d{2}(\.\d{3})?(Z|[+-]\d{2}:\d{2})$/);

async function answer(schema: unknown, seed: number): Promise<{ status: number; body: unknown }> {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Go." }],
      max_tokens: 300,
      temperature: 1,
      seed,
      response_format: { type: "json_schema", json_schema: { name: "x", schema } },
    }),
  });
  return { status: response.status, body: await response.json() };
}

/** The JSON the model wrote for `schema` with each seed, after checking it ended. */
async function answers(schema: unknown, seeds: number): Promise<unknown[]> {
  const values: unknown[] = [];
  for (let seed = 1; seed <= seeds; seed++) {
    const { status, body } = await answer(schema, seed);
    expect(status, JSON.stringify(body)).toBe(200);
    const [choice] = (body as ChatCompletionBody).choices;
    expect(choice?.finish_reason).toBe("stop");
    values.push(JSON.parse(choice?.message.content ?? ""));
  }
  return values;
}

describe("anyOf beside other keywords over HTTP", () => {
  // Regression: a branch's keywords replaced those beside `anyOf`, so `id` (required) was left
  // out of both branches and `null` was written under `type: "object"`.
  it("writes only values that meet the keywords beside anyOf and one branch", async () => {
    const schema = {
      type: "object",
      properties: { id: { type: "integer" } },
      required: ["id"],
      anyOf: [
        { properties: { a: { type: "string", maxLength: 3 } }, required: ["a"] },
        { type: ["object", "null"], properties: { b: { type: "boolean" } }, required: ["b"] },
      ],
    };
    const validate = ajv.compile(schema);
    for (const value of await answers(schema, 4)) {
      expect(validate(value), `${JSON.stringify(value)}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  // Regression: `maxLength` beside `format: "date"` was dropped, and a 10-character date written.
  it("refuses a format whose length the lengths beside it do not allow, before anything is billed", async () => {
    const { status, body } = await answer({ type: "string", format: "date", maxLength: 5 }, 1);
    expect(status).toBe(400);
    expect((body as { error: Record<string, unknown> }).error).toMatchObject({
      code: "invalid_value",
      param: "response_format.json_schema.schema",
      message: expect.stringMatching(/at '#': 'format' 'date' is written in 10 characters/),
    });
    const dates = { type: "array", items: { type: "string", format: "date", minLength: 10 }, maxItems: 2 };
    const validate = ajv.compile(dates);
    for (const value of await answers(dates, 2)) expect(validate(value), JSON.stringify(value)).toBe(true);
  });

  // Regression: an alternative that can only nest (an array of at least one of itself) was kept
  // beside `null`, and the model nested it until the context was full.
  it("ends the JSON where one alternative can only nest and another ends", async () => {
    const schema = {
      type: "object",
      properties: { a: { anyOf: [{ $ref: "#/$defs/deep" }, { type: "null" }] } },
      required: ["a"],
      $defs: { deep: { type: "array", minItems: 1, items: { $ref: "#/$defs/deep" } } },
    };
    for (const value of await answers(schema, 3)) expect(value).toEqual({ a: null });
  });
});
