import { describe, expect, it } from "vitest";
import { listEndpointNames } from "../../../src/engine/openai/list-endpoint-names.ts";
import { redactUpstreamText } from "../../../src/engine/openai/redact-upstream-text.ts";

describe("listEndpointNames", () => {
  it("lists the origin, with and without its default port, the host and the host name, longest first", () => {
    expect(listEndpointNames("https://user:pw@API.Example.com/v1?token=abc")).toEqual([
      "https://api.example.com:443",
      "https://api.example.com",
      "api.example.com",
    ]);
    expect(listEndpointNames("http://10.0.0.7:8000/v1")).toEqual([
      "http://10.0.0.7:8000",
      "10.0.0.7:8000",
      "10.0.0.7",
    ]);
  });

  it("leaves out a host name alone that a sentence may hold as a word: one without a dot", () => {
    expect(listEndpointNames("http://llm:8000/v1")).toEqual(["http://llm:8000", "llm:8000"]);
    expect(listEndpointNames("http://localhost:11434/v1")).toEqual([
      "http://localhost:11434",
      "localhost:11434",
    ]);
    // vLLM's own 400, from an endpoint at http://model:8000: its words are its own.
    const names = listEndpointNames("http://model:8000/v1");
    expect(
      redactUpstreamText(
        "This model's maximum context length is 4096 tokens (http://model:8000).",
        [],
        names,
      ),
    ).toBe("This model's maximum context length is 4096 tokens (the upstream server).");
  });
});

describe("redactUpstreamText with the endpoint's names", () => {
  const names = listEndpointNames("http://10.0.0.7:8000/v1");

  it("replaces the names where they stand whole, in any case", () => {
    expect(
      redactUpstreamText("POST http://10.0.0.7:8000/v1 failed; 10.0.0.7:8000 and 10.0.0.7.", [], names),
    ).toBe("POST the upstream server/v1 failed; the upstream server and the upstream server.");
    expect(
      redactUpstreamText(
        "api.example.com down",
        [],
        listEndpointNames("https://API.EXAMPLE.COM/v1").map((name) => name.toUpperCase()),
      ),
    ).toBe("the upstream server down");
  });

  it("leaves other hosts and addresses that only contain a name", () => {
    expect(redactUpstreamText("10.0.0.70 and 110.0.0.7 and 10.0.0.7.5 and 10.0.0.7:80", [], names)).toBe(
      "10.0.0.70 and 110.0.0.7 and 10.0.0.7.5 and the upstream server:80",
    );
    expect(
      redactUpstreamText(
        "eu.api.example.com and api.example.com-2",
        [],
        listEndpointNames("https://api.example.com"),
      ),
    ).toBe("eu.api.example.com and api.example.com-2");
  });
});
