import { describe, expect, it } from "vitest";
import { TINY_MODEL } from "../../support/test-server.ts";
import { useTestServer } from "../../support/use-test-server.ts";

/**
 * Tools with `tool_choice: auto` beside a JSON format on a local model, as agents with structured
 * output send them: the client gets a call or the answer as JSON content, never the envelope the
 * grammar makes the model write (plan-generation.ts, `call-or-json`), streamed or not.
 */
const server = useTestServer();

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];
const answerSchema = {
  type: "object",
  properties: { verdict: { enum: ["yes", "no"] }, score: { type: "integer", minimum: 0, maximum: 10 } },
  required: ["verdict", "score"],
  additionalProperties: false,
};

interface Outcome {
  content: string;
  calls: { id: string; name: string; arguments: string }[];
  finishReason: string;
}

async function ask(seed: number, stream: boolean): Promise<Outcome> {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${server().starterKey}`, "content-type": "application/json" },
    body: JSON.stringify({
      model: TINY_MODEL,
      messages: [{ role: "user", content: "Is it warm in Paris?" }],
      tools,
      tool_choice: "auto",
      response_format: {
        type: "json_schema",
        json_schema: { name: "verdict", schema: answerSchema, strict: true },
      },
      temperature: 1,
      seed,
      max_tokens: 200,
      stream,
    }),
  });
  expect(response.status).toBe(200);
  return stream ? readStream(await response.text()) : readCompletion(await response.json());
}

function readCompletion(body: unknown): Outcome {
  const { choices } = body as {
    choices: {
      message: {
        content: string | null;
        tool_calls?: { id: string; function: { name: string; arguments: string } }[];
      };
      finish_reason: string;
    }[];
  };
  const [choice] = choices;
  if (choice === undefined) throw new Error("no choice");
  return {
    content: choice.message.content ?? "",
    calls: (choice.message.tool_calls ?? []).map((call) => ({ id: call.id, ...call.function })),
    finishReason: choice.finish_reason,
  };
}

function readStream(body: string): Outcome {
  const outcome: Outcome = { content: "", calls: [], finishReason: "" };
  for (const line of body.split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice("data: ".length)) as {
      choices: {
        delta: {
          content?: string | null;
          tool_calls?: { index: number; id?: string; function: { name?: string; arguments: string } }[];
        };
        finish_reason: string | null;
      }[];
    };
    const [choice] = chunk.choices;
    if (choice === undefined) continue;
    outcome.content += choice.delta.content ?? "";
    for (const delta of choice.delta.tool_calls ?? []) {
      if (delta.id !== undefined) {
        // Each call opens with its id, name and no arguments yet (SPEC §4).
        expect(delta.function.arguments).toBe("");
        outcome.calls[delta.index] = { id: delta.id, name: delta.function.name ?? "", arguments: "" };
      } else {
        const call = outcome.calls[delta.index];
        if (call === undefined) throw new Error("arguments before the call's first delta");
        call.arguments += delta.function.arguments;
      }
    }
    if (choice.finish_reason !== null) outcome.finishReason = choice.finish_reason;
  }
  return outcome;
}

describe("tools with auto beside a JSON format on a local model", () => {
  it.each([false, true])("answers with a call or with JSON content (stream: %s)", async (stream) => {
    const kinds: string[] = [];
    for (const seed of [1, 13, 15]) {
      const outcome = await ask(seed, stream);
      if (outcome.calls.length > 0) {
        kinds.push("call");
        expect(outcome.finishReason).toBe("tool_calls");
        expect(outcome.content).toBe("");
        expect(outcome.calls).toHaveLength(1);
        expect(outcome.calls[0]?.name).toBe("get_weather");
        expect(outcome.calls[0]?.id).toMatch(/^call_/);
        expect(Object.keys(JSON.parse(outcome.calls[0]?.arguments ?? ""))).toEqual(["city"]);
      } else {
        kinds.push("answer");
        expect(outcome.finishReason).toBe("stop");
        const answer = JSON.parse(outcome.content) as Record<string, unknown>;
        expect(Object.keys(answer)).toEqual(["verdict", "score"]);
        expect(["yes", "no"]).toContain(answer.verdict);
        expect(Number.isInteger(answer.score)).toBe(true);
      }
    }
    // What the random-weight test model does with these seeds (about one seed in five calls).
    expect(kinds).toEqual(["answer", "call", "call"]);
  });
});
