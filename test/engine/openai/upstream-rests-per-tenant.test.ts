/**
 * An upstream may answer a failure that depends on the request: a firewall in front of it that
 * refuses some content with 403, a 500 for one input. Failures from one account's requests alone
 * rest the endpoint for that account only. Regression: an account that sent three such requests
 * rested the endpoint for every account (503 "check the endpoint's api_key", x-should-retry:
 * false), and one more request after each rest doubled it, at no cost to the sender.
 */
import { afterEach, describe, expect, it } from "vitest";
import type { ChatEngine, StreamPart } from "../../../src/engine/engine.ts";
import {
  chatRequest,
  closeEnginesAndMocks,
  createTestEngine,
  startTestMock,
  textOf,
  upstreamModel,
} from "./engine-helpers.ts";
import type { MockHandler } from "./mock-upstream.ts";
import { streamText } from "./mock-upstream.ts";

afterEach(closeEnginesAndMocks);

/** Answers an HTML 403 page for a request whose last message has "<script>", as a firewall does. */
const firewalled =
  (answer: MockHandler): MockHandler =>
  (request, response) => {
    const messages = request.body.messages as { content: string }[];
    if (!(messages.at(-1)?.content ?? "").includes("<script>")) return answer(request, response);
    response.writeHead(403, { "content-type": "text/html" });
    response.end("<html><body>Request blocked</body></html>");
  };

/** An engine on one firewalled endpoint answering "fine", resting after three failures, no retries. */
async function firewalledEngine() {
  const upstream = await startTestMock(firewalled(streamText(["fine"])));
  const engine = createTestEngine({
    model: upstreamModel([upstream.baseUrl]),
    settings: { maxRetries: 0, failureThreshold: 3 },
  });
  return { upstream, engine };
}

/** Runs `content` for `tenant` to its end: the text, or the error thrown. */
async function ask(
  engine: ChatEngine,
  tenant: string,
  content: string,
): Promise<string | { status: number }> {
  const prepared = await engine.prepare(chatRequest({ messages: [{ role: "user", content }] }));
  const parts: StreamPart[] = [];
  try {
    for await (const batch of prepared.run(new AbortController().signal, { tenant })) parts.push(...batch);
  } catch (error) {
    return { status: (error as { status: number }).status };
  }
  return textOf(parts);
}

describe("an upstream endpoint that fails one account's requests alone", () => {
  it("rests for that account, and serves the others", async () => {
    const { upstream, engine } = await firewalledEngine();
    for (let attempt = 0; attempt < 3; attempt++)
      expect(await ask(engine, "mallory", "<script>x</script>")).toEqual({ status: 503 });
    const sent = upstream.requests.length;

    expect(await ask(engine, "alice", "Hello")).toBe("fine");
    expect(engine.status()).toBe("available");
    expect(engine.endpoints?.()).toEqual({ total: 1, resting: 0 });
    // The sender's own requests wait out its rest, without reaching the upstream.
    expect(await ask(engine, "mallory", "Hello")).toEqual({ status: 503 });
    expect(upstream.requests.length).toBe(sent + 1);
  });

  it("shows the model unavailable while no one is served (a deployment's only account), and as each account finds it", async () => {
    const { engine } = await firewalledEngine();
    for (let attempt = 0; attempt < 3; attempt++)
      expect(await ask(engine, "only", "<script>x</script>")).toEqual({ status: 503 });
    // Regression: a dead endpoint used by one account showed as available, resting 0.
    expect(engine.status()).toBe("unavailable");
    expect(engine.endpoints?.()).toEqual({ total: 1, resting: 1 });
    expect([engine.status("only"), engine.status("other")]).toEqual(["unavailable", "available"]);
    expect(await ask(engine, "other", "Hello")).toBe("fine");
    expect(engine.status()).toBe("available");
  });

  it("rests for everyone when the failures come from several accounts", async () => {
    const { engine } = await firewalledEngine();
    for (const tenant of ["mallory", "alice", "bob"])
      expect(await ask(engine, tenant, "<script>x</script>")).toEqual({ status: 503 });
    expect(await ask(engine, "carol", "Hello")).toEqual({ status: 503 });
    expect(engine.endpoints?.()).toEqual({ total: 1, resting: 1 });
  });
});
