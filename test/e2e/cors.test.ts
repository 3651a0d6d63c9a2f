/**
 * Browsers calling the `/v1` API from a web page (a chat front end, the `openai` SDK with
 * `dangerouslyAllowBrowser`): preflights are answered without a key, and every `/v1` answer, errors
 * and streams included, lets the page read it. The admin API lets no page in.
 */
import { describe, expect, it } from "vitest";
import { TINY_MODEL } from "../support/test-server.ts";
import { useTestServer } from "../support/use-test-server.ts";

const origin = "https://chat.example.com";

const server = useTestServer();

describe("CORS on the /v1 API", () => {
  it("answers a preflight without a key, allowing the headers the page asked for", async () => {
    const response = await fetch(`${server().baseUrl}/chat/completions`, {
      method: "OPTIONS",
      headers: {
        origin,
        "access-control-request-method": "POST",
        "access-control-request-headers":
          "authorization, content-type, x-stainless-os, x-stainless-retry-count",
      },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-allow-methods")).toBe("GET, POST");
    expect(response.headers.get("access-control-allow-headers")).toBe(
      "authorization, content-type, x-stainless-os, x-stainless-retry-count",
    );
    expect(Number(response.headers.get("access-control-max-age"))).toBeGreaterThan(0);
  });

  it("lets the page read answers, errors and streams, with their request id and limits", async () => {
    const post = (key: string, body: Record<string, unknown>) =>
      fetch(`${server().baseUrl}/chat/completions`, {
        method: "POST",
        headers: { origin, authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: TINY_MODEL,
          messages: [{ role: "user", content: "Hi" }],
          max_tokens: 2,
          ...body,
        }),
      });
    for (const response of [
      await post(server().starterKey, {}),
      await post(server().starterKey, { stream: true }),
      await post("sk-tg-nosuchkey000-wrong", {}),
      await fetch(`${server().baseUrl}/models`, {
        headers: { origin, authorization: `Bearer ${server().starterKey}` },
      }),
      // A base URL with a trailing slash joined to the path: the same answer, readable the same.
      await fetch(`${server().origin}//v1//models`, {
        headers: { origin, authorization: `Bearer ${server().starterKey}` },
      }),
    ]) {
      await response.arrayBuffer();
      expect([200, 401]).toContain(response.status);
      expect(response.headers.get("access-control-allow-origin")).toBe("*");
      expect(response.headers.get("access-control-expose-headers")).toContain("x-request-id");
      expect(response.headers.get("access-control-expose-headers")).toContain("x-ratelimit-remaining-tokens");
    }
  });

  it("lets the page read the error of a URL the router cannot decode (regression: no CORS headers)", async () => {
    const response = await fetch(`${server().baseUrl}/models/bad%zz`, {
      headers: { origin, authorization: `Bearer ${server().starterKey}` },
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("invalid_http_request");
    expect(response.headers.get("access-control-allow-origin")).toBe("*");
    expect(response.headers.get("access-control-expose-headers")).toContain("x-request-id");
  });

  it("leaves requests without an Origin, the admin API and non-preflight OPTIONS as they were", async () => {
    const plain = await fetch(`${server().baseUrl}/models`, {
      headers: { authorization: `Bearer ${server().starterKey}` },
    });
    expect(plain.headers.get("access-control-allow-origin")).toBeNull();
    const admin = await fetch(`${server().origin}/admin/accounts`, {
      headers: { origin, authorization: `Bearer ${server().adminKey}` },
    });
    expect(admin.status).toBe(200);
    expect(admin.headers.get("access-control-allow-origin")).toBeNull();
    const adminPreflight = await fetch(`${server().origin}/admin/accounts`, {
      method: "OPTIONS",
      headers: { origin, "access-control-request-method": "GET" },
    });
    expect(adminPreflight.headers.get("access-control-allow-origin")).toBeNull();
    const notPreflight = await fetch(`${server().baseUrl}/models`, { method: "OPTIONS" });
    expect(notPreflight.status).toBe(404);
    expect(((await notPreflight.json()) as { error: { code: string } }).error.code).toBe("not_found");
  });
});
