/**
 * The formats a local model's grammar writes as patterns (format-patterns.ts): every string the
 * grammar writes must pass the strictest readers of the format (zod 4's regular expressions,
 * ajv-formats' full formats, `new URL()`), checked on random strings drawn from the pattern, and
 * the grammar llama.cpp builds takes them and refuses what is not the format.
 */
import { fullFormats } from "ajv-formats/dist/formats.js";
import { describe, expect, it } from "vitest";
import { regexes } from "zod/v4/core";
import { formatPatterns } from "../../../src/engine/llama/format-patterns.ts";
import { createRandom } from "../../support/create-random.ts";
import { samplePattern } from "./pattern-samples.ts";
import { schemaGrammarMatcher } from "./schema-grammar-matcher.ts";

/** Whether ajv-formats' full `format` takes `value`. */
function ajvAccepts(format: string, value: string): boolean {
  const check = (fullFormats as Record<string, unknown>)[format];
  if (check instanceof RegExp) return check.test(value);
  if (typeof check === "function") return (check as (value: string) => boolean)(value);
  const { validate } = check as { validate: RegExp | ((value: string) => boolean) };
  return validate instanceof RegExp ? validate.test(value) : validate(value);
}

/** The readers of each format, each saying whether it takes a string. */
const readers: Record<string, ((value: string) => boolean)[]> = {
  email: [(value) => regexes.email.test(value), (value) => ajvAccepts("email", value)],
  hostname: [(value) => regexes.hostname.test(value), (value) => ajvAccepts("hostname", value)],
  ipv4: [(value) => regexes.ipv4.test(value), (value) => ajvAccepts("ipv4", value)],
  ipv6: [(value) => regexes.ipv6.test(value), (value) => ajvAccepts("ipv6", value)],
  duration: [(value) => regexes.duration.test(value), (value) => ajvAccepts("duration", value)],
  uri: [(value) => URL.canParse(value), (value) => ajvAccepts("uri", value)],
};

/** Strings that are not the format (or not a string every reader takes). */
const others: Record<string, string[]> = {
  email: ["", "plain", "a@b", "@b.co", "a@.co", "a..b@c.co", ".a@b.co", "a@b.c", "A@B.CO", "a b@c.co"],
  hostname: ["", "-a", "a-", "a..b", "a_b", `${"a".repeat(64)}.com`, "A.com"],
  ipv4: ["", "1.2.3", "256.1.1.1", "01.2.3.4", "1.2.3.4.5", "1.2.3.a"],
  ipv6: ["", "::1", "1::2", "1:2:3:4:5:6:7", "g:0:0:0:0:0:0:0", "12345:0:0:0:0:0:0:0"],
  duration: ["", "P", "PT", "P1DT", "1D", "P1H", "PT1D", "P1W1D"],
  uri: ["", "http://example.com", "https://", "https://-a.com", "https://a b.com", "ftp://x.org"],
};

describe("formats a local model's grammar writes as patterns", () => {
  it.each(Object.keys(readers))(
    "%s: what the grammar writes every reader takes, and it refuses what is not the format (regression: any string)",
    async (format) => {
      const pattern = formatPatterns[format] as string;
      const accepts = await schemaGrammarMatcher({ type: "string", format });
      for (const value of samplePattern(pattern, 300, createRandom(format.length))) {
        expect(accepts(JSON.stringify(value)), value).toBe(true);
        for (const reader of readers[format] ?? []) expect(reader(value), `${format}: ${value}`).toBe(true);
        // Within the lengths readers hold to: 64 characters before an e-mail's `@`, 254 in all.
        if (format === "email") expect(value.indexOf("@") <= 64 && value.length <= 254, value).toBe(true);
      }
      for (const value of others[format] ?? []) expect(accepts(JSON.stringify(value)), value).toBe(false);
    },
  );

  it("win over a pattern beside them, and leave other formats unenforced", async () => {
    const email = await schemaGrammarMatcher({ type: "string", format: "email", pattern: "^x$" });
    expect(email('"a@b.co"')).toBe(true);
    expect(email('"x"')).toBe(false);
    const other = await schemaGrammarMatcher({ type: "string", format: "iri" });
    expect(other('"anything at all"')).toBe(true);
  });
});
