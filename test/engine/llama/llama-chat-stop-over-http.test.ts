/**
 * Stop strings on both generation paths, seen by a client of a real server: LlamaChat's (tools
 * offered: create-stop-matcher.ts applies them) and the direct one (plain text:
 * generate-directly.ts applies them): four stop strings of 200,001 characters are taken, text that begins one
 * is held and then returned when `max_tokens` cuts, a stop string that completes cuts the answer,
 * and streamed and plain answers agree.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { postTinyChat } from "../../support/test-server.ts";
import { useTestServer } from "../../support/use-test-server.ts";

const server = useTestServer();

/** Offered so that the plan is `functions`, which LlamaChat generates; this seed never calls it. */
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];
/** The request's sampling and, on the LlamaChat path, its tools (set by each describe). */
let sampling: Record<string, unknown> = {};
/** Fewer than the tiny model writes before it ends by itself here. */
const maxTokens = 8;

interface Answer {
  content: string;
  finishReason: string;
  completionTokens: number;
}

async function ask(body: Record<string, unknown>): Promise<Answer> {
  const response = await postTinyChat(server(), { ...sampling, ...body }, maxTokens);
  expect(response.status).toBe(200);
  const completion = (await response.json()) as {
    choices: { message: { content: string | null; tool_calls?: unknown[] }; finish_reason: string }[];
    usage: { completion_tokens: number };
  };
  const [choice] = completion.choices;
  expect(choice?.message.tool_calls).toBeUndefined();
  return {
    content: choice?.message.content ?? "",
    finishReason: choice?.finish_reason ?? "",
    completionTokens: completion.usage.completion_tokens,
  };
}

async function askStreamed(body: Record<string, unknown>): Promise<Answer> {
  const response = await postTinyChat(
    server(),
    { ...sampling, ...body, stream: true, stream_options: { include_usage: true } },
    maxTokens,
  );
  expect(response.status).toBe(200);
  const answer: Answer = { content: "", finishReason: "", completionTokens: -1 };
  for (const line of (await response.text()).split("\n")) {
    if (!line.startsWith("data: {")) continue;
    const chunk = JSON.parse(line.slice("data: ".length)) as {
      choices: { delta: { content?: string; tool_calls?: unknown[] }; finish_reason: string | null }[];
      usage?: { completion_tokens: number } | null;
    };
    const [choice] = chunk.choices;
    expect(choice?.delta.tool_calls).toBeUndefined();
    answer.content += choice?.delta.content ?? "";
    answer.finishReason = choice?.finish_reason ?? answer.finishReason;
    if (chunk.usage) answer.completionTokens = chunk.usage.completion_tokens;
  }
  return answer;
}

/** `start` made 200,001 characters long with a periodic run, so that it never completes. */
function longStop(start: string, end: string): string {
  return `${start}${"ab".repeat(100_000)}`.slice(0, 200_000) + end;
}

describe.each([
  ["LlamaChat", { tools, temperature: 1, seed: 5 }],
  ["direct", { temperature: 1, seed: 5 }],
])("stop strings over HTTP on the %s path", (_path, pathSampling) => {
  beforeAll(() => {
    sampling = pathSampling;
  });

  it("holds text that begins one of four 200,001-character stop strings and returns it at max_tokens", async () => {
    const free = await ask({});
    expect(free.finishReason).toBe("length");
    expect(free.content).not.toBe("");
    // The first begins with all the text generated: held to the end, then returned.
    const stop = [
      longStop(`${free.content}\u0000`, "W"),
      longStop("", "X"),
      longStop("a", "Y"),
      longStop("b", "Z"),
    ];
    expect(await ask({ stop })).toEqual(free);
    expect(await askStreamed({ stop })).toEqual(free);
  });

  it("cuts before a stop string that completes, beside three 200,001-character ones", async () => {
    const free = await ask({});
    const characters = [...free.content];
    const start = characters.length - 4;
    const cut = characters.slice(start, start + 2).join("");
    // The text before the stop string's first occurrence comes back, and it is held as it begins
    // the first long stop string.
    const before = free.content.slice(0, free.content.indexOf(cut));
    const stop = [longStop(free.content.slice(0, 3), "W"), longStop("", "X"), cut, longStop("b", "Z")];
    const plain = await ask({ stop });
    expect(plain.content).toBe(before);
    expect(plain.finishReason).toBe("stop");
    expect(plain.completionTokens).toBeLessThanOrEqual(free.completionTokens);
    expect(await askStreamed({ stop })).toEqual(plain);
  });
});
