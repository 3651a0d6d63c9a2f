import { describe, expect, it } from "vitest";
import { normalizeRequestTarget } from "../../src/api/normalize-request-target.ts";

describe("normalizeRequestTarget", () => {
  it.each([
    ["//v1/models", "/v1/models"],
    ["/v1//chat/completions", "/v1/chat/completions"],
    ["///admin///accounts/", "/admin/accounts/"],
    ["/v1//models?after=http://x//y", "/v1/models?after=http://x//y"],
    ["/v1/models/acme%2F%2Fdouble", "/v1/models/acme%2F%2Fdouble"],
    ["/v1/models", "/v1/models"],
    ["*", "*"],
    ["http://host//v1/models", "/v1/models"],
    ["http://127.0.0.1:8080/admin/nosuch?x=%61", "/admin/nosuch?x=%61"],
    ["HTTPS://host", "/"],
    ["/%61dmin/nosuch", "/admin/nosuch"],
    ["/%76%31/models/a%20b%2fc%7E", "/v1/models/a%20b%2fc~"],
    ["/v1/models/%zz", "/v1/models/%zz"],
  ])("makes %j %j, leaving the query and other targets as they are", (url, normalized) => {
    expect(normalizeRequestTarget(url)).toBe(normalized);
  });
});
