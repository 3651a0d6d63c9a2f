/**
 * Changing a key's settings takes effect on the key its holder already has: the next request
 * after `PATCH /admin/keys/:id` (or within the 1-second key cache after `tollgate keys update`)
 * goes by the new rate limits and models.
 */
import { describe, expect, it } from "vitest";
import { runKeysCommand } from "../../src/admin/keys-command.ts";
import { collectOutput } from "../admin/cli-output.ts";
import { EMBEDDING_MODEL, TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const server = useTestServer();

async function admin(method: string, path: string, body?: unknown) {
  const response = await fetch(`${server().origin}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${server().adminKey}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: response.status, body: await response.json() };
}

async function chat(key: string) {
  const response = await fetch(`${server().baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: TINY_MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 }),
  });
  const body = (await response.json()) as { error?: { code: string } };
  return {
    status: response.status,
    code: body.error?.code,
    limit: response.headers.get("x-ratelimit-limit-requests"),
  };
}

describe("changing a key's settings on the real server", () => {
  it("PATCH: rpm 1 refuses the second request; rpm 5 admits the next ones at once; models without the model refuse it", async () => {
    const { key, publicId } = await server().createFundedKey("patched", "10", { rpm: 1 });
    expect(await chat(key)).toMatchObject({ status: 200, limit: "1" });
    expect(await chat(key)).toMatchObject({ status: 429, code: "rate_limit_exceeded" });

    const raised = await admin("PATCH", `/admin/keys/${publicId}`, { rpm: 5 });
    expect(raised.status).toBe(200);
    expect(raised.body).toMatchObject({ public_id: publicId, rpm: 5 });
    // The same key, not a new one: the very next request passes (the server dropped the key from
    // its cache), and so do the two after it; the one it used at rpm 1 counts within the 5 (a
    // changed limit keeps what the bucket used), which leaves one for the end of this test.
    expect(await chat(key)).toMatchObject({ status: 200, limit: "5" });
    for (let request = 0; request < 2; request++) {
      expect(await chat(key)).toMatchObject({ status: 200, limit: "5" });
    }

    const narrowed = await admin("PATCH", `/admin/keys/${publicId}`, { models: [EMBEDDING_MODEL] });
    expect(narrowed.status).toBe(200);
    expect(await chat(key)).toMatchObject({ status: 403, code: "model_not_allowed" });

    // Every model again, and the model answers.
    expect((await admin("PATCH", `/admin/keys/${publicId}`, { models: null })).status).toBe(200);
    expect((await chat(key)).status).toBe(200);
  });

  it("tollgate keys update (another process's connection to the store): the server uses the new rpm within its 1-second key cache", async () => {
    const { key, publicId } = await server().createFundedKey("updated-by-cli", "10", { rpm: 1 });
    expect((await chat(key)).status).toBe(200);
    expect((await chat(key)).status).toBe(429);

    const out = collectOutput();
    await runKeysCommand(server().store, ["update", publicId, "--rpm", "5"], out);
    expect(out.lines).toContain("rpm:       5");
    // The cache keeps a key's row 1 s at most (no timing asserted: the machines are shared); a
    // server that never read the key again would refuse for the whole minute of the old rpm.
    const updated = performance.now();
    let answer = await chat(key);
    while (answer.status === 429 && performance.now() - updated < 5000) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      answer = await chat(key);
    }
    expect(answer).toMatchObject({ status: 200, limit: "5" });
  });
});
