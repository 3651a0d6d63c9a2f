import { describe, expect, it } from "vitest";
import { listEndpointSecrets } from "../../../src/engine/openai/list-endpoint-secrets.ts";

describe("listEndpointSecrets", () => {
  it("lists the api_key, every header value and the base URL's user, password and query values", () => {
    const secrets = listEndpointSecrets({
      baseUrl: "https://gateway-user:pass%2Fword@llm.example/v1?api-key=k%2B1%2Fzz&sig=abc+def&tok3n",
      apiKey: "vllm-local-7f3a",
      headers: { "api-key": "azkey-9c1e2f", authorization: "Basic dXNlcjpwYXNz" },
    });
    expect(new Set(secrets)).toEqual(
      new Set([
        "vllm-local-7f3a",
        "azkey-9c1e2f",
        "Basic dXNlcjpwYXNz",
        "dXNlcjpwYXNz",
        "gateway-user",
        "pass%2Fword",
        "pass/word",
        "k%2B1%2Fzz",
        "k+1/zz",
        "abc+def",
        "abc def",
        "tok3n",
      ]),
    );
  });

  it("puts the longest first, so that a secret that holds another is removed whole", () => {
    const secrets = listEndpointSecrets({
      baseUrl: "http://127.0.0.1/v1",
      apiKey: "abcd",
      headers: { "x-key": "abcd-longer" },
    });
    expect(secrets).toEqual(["abcd-longer", "abcd"]);
  });

  it("leaves out values under four characters, which would redact ordinary words", () => {
    expect(
      listEndpointSecrets({
        baseUrl: "http://u:p@127.0.0.1/v1?v=1&flag=yes",
        apiKey: "abc",
        headers: { "x-debug": "on" },
      }),
    ).toEqual([]);
  });
});
