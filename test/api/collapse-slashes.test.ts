import { describe, expect, it } from "vitest";
import { collapseSlashes } from "../../src/api/collapse-slashes.ts";

describe("collapseSlashes", () => {
  it.each([
    ["//v1/models", "/v1/models"],
    ["/v1//chat/completions", "/v1/chat/completions"],
    ["///admin///accounts/", "/admin/accounts/"],
    ["/v1//models?after=http://x//y", "/v1/models?after=http://x//y"],
    ["/v1/models/acme%2F%2Fdouble", "/v1/models/acme%2F%2Fdouble"],
    ["/v1/models", "/v1/models"],
    ["*", "*"],
    ["http://host//v1/models", "http://host//v1/models"],
  ])("makes %j %j, leaving the query and other targets as they are", (url, collapsed) => {
    expect(collapseSlashes(url)).toBe(collapsed);
  });
});
