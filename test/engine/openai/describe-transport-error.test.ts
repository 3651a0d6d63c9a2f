import { describe, expect, it } from "vitest";
import { describeTransportError } from "../../../src/engine/openai/describe-transport-error.ts";

describe("describeTransportError", () => {
  it.each([
    [{ code: "ECONNREFUSED" }, "refused the connection"],
    [{ code: "UND_ERR_CONNECT_TIMEOUT" }, "did not accept a connection in time"],
    [{ code: "ENOTFOUND" }, "could not be found (its host name does not resolve)"],
    [{ code: "UND_ERR_SOCKET" }, "closed the connection"],
    [{ cause: { code: "ECONNRESET" } }, "closed the connection"],
    [{ code: "ERR_TLS_CERT_ALTNAME_INVALID" }, "failed the TLS handshake"],
    [
      Object.assign(new Error("Expected HTTP/"), { name: "HTTPParserError" }),
      "sent a response that is not valid HTTP",
    ],
    [{ code: "HPE_INVALID_HEADER_TOKEN" }, "sent a response that is not valid HTTP"],
    [{ code: "UND_ERR_HEADERS_OVERFLOW" }, "sent response headers too large to read"],
    [
      { code: "UND_ERR_RES_CONTENT_LENGTH_MISMATCH" },
      "sent a body whose length does not match its content-length",
    ],
    [new Error("boom"), "could not be reached"],
    ["text", "could not be reached"],
  ])("describes %j", (error, description) => {
    expect(describeTransportError(error)).toBe(description);
  });
});
