/**
 * A character outside the BMP (an emoji) that an upstream splits between two deltas, each half a
 * JSON-escaped surrogate, as a client reads the event stream through a real server. Regression:
 * each half went out in its own event; a JavaScript client happened to join them, but a client
 * that decodes each event's JSON and encodes it as UTF-8 (Python's) failed on the lone halves.
 */
import { describe, expect, it } from "vitest";
import { chunk, writeEvents } from "./mock-upstream.ts";
import { postChat, useUpstreamOnlyServer } from "./use-upstream-only-server.ts";

const EMOJI = "\u{1F600}";
const [HIGH, LOW] = [EMOJI.slice(0, 1), EMOJI.slice(1)];

const { server, upstream } = useUpstreamOnlyServer();

async function complete(stream: boolean): Promise<Response> {
  const response = await postChat(server(), {
    stream,
    ...(stream ? { stream_options: { include_usage: true } } : {}),
  });
  expect(response.status).toBe(200);
  return response;
}

interface Delta {
  content?: string;
  tool_calls?: { function: { arguments: string } }[];
}

/** Each event's delta, its JSON decoded on its own, as every client decodes events. */
async function streamedDeltas(): Promise<{ deltas: Delta[]; usage: unknown }> {
  const text = await (await complete(true)).text();
  const deltas: Delta[] = [];
  let usage: unknown;
  for (const line of text.split("\n")) {
    if (!line.startsWith("data: ") || line === "data: [DONE]") continue;
    const event = JSON.parse(line.slice("data: ".length)) as {
      choices: { delta: Delta }[];
      usage?: unknown;
    };
    if (event.choices[0] !== undefined) deltas.push(event.choices[0].delta);
    if (event.usage !== null && event.usage !== undefined) usage = event.usage;
  }
  return { deltas, usage };
}

/** `fragments` as UTF-8, each encoded on its own (Python raises where Node writes U+FFFD). */
function asUtf8(fragments: readonly string[]): string {
  for (const fragment of fragments) expect(fragment.isWellFormed(), JSON.stringify(fragment)).toBe(true);
  return Buffer.concat(fragments.map((fragment) => Buffer.from(fragment, "utf8"))).toString("utf8");
}

describe("an emoji an upstream splits between two deltas", () => {
  it("reaches a streaming client whole in the text, with the answer and usage of a non-streamed request", async () => {
    upstream().handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: `X${HIGH}` }),
        chunk({ content: `${LOW}Y` }),
        chunk({}, "stop"),
      ]),
    );
    const { deltas, usage } = await streamedDeltas();
    expect(asUtf8(deltas.flatMap((delta) => delta.content ?? []))).toBe(`X${EMOJI}Y`);
    const whole = (await (await complete(false)).json()) as {
      choices: { message: { content: string } }[];
      usage: unknown;
    };
    expect(whole.choices[0]?.message.content).toBe(`X${EMOJI}Y`);
    expect(usage).toEqual(whole.usage);
  });

  it("reaches a streaming client whole in a tool call's arguments", async () => {
    upstream().handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: null }),
        chunk({
          tool_calls: [
            {
              index: 0,
              id: "call_e",
              type: "function",
              function: { name: "say", arguments: `{"t":"${HIGH}` },
            },
          ],
        }),
        chunk({ tool_calls: [{ index: 0, function: { arguments: `${LOW}"}` } }] }),
        chunk({}, "tool_calls"),
      ]),
    );
    const { deltas } = await streamedDeltas();
    const fragments = deltas.flatMap(
      (delta) => delta.tool_calls?.map((call) => call.function.arguments) ?? [],
    );
    expect(asUtf8(fragments)).toBe(`{"t":"${EMOJI}"}`);
  });
});

describe("a lone surrogate half inside one upstream delta", () => {
  it("reaches streaming and non-streaming clients as U+FFFD, which they can encode as UTF-8 (regression: passed on as `\\ud800`)", async () => {
    upstream().handle((_request, response) =>
      writeEvents(response, [
        chunk({ role: "assistant", content: "" }),
        chunk({ content: `X${HIGH}Y${LOW}` }),
        chunk({ content: "Z" }),
        chunk({}, "stop"),
      ]),
    );
    const { deltas } = await streamedDeltas();
    expect(asUtf8(deltas.flatMap((delta) => delta.content ?? []))).toBe("X\uFFFDY\uFFFDZ");
    const whole = (await (await complete(false)).json()) as { choices: { message: { content: string } }[] };
    expect(asUtf8([whole.choices[0]?.message.content ?? ""])).toBe("X\uFFFDY\uFFFDZ");
  });
});
