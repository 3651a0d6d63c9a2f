import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  formatApiKey,
  generateApiKey,
  hashSecret,
  isPublicId,
  parseApiKey,
  verifySecret,
} from "../../src/auth/api-key.ts";

describe("generateApiKey", () => {
  it("makes keys shaped sk-tg-<12 [a-z0-9]>-<43 base62>", () => {
    const { key, publicId } = generateApiKey();
    expect(key).toMatch(/^sk-tg-[a-z0-9]{12}-[A-Za-z0-9]{43}$/);
    expect(key.startsWith(`sk-tg-${publicId}-`)).toBe(true);
  });

  it("stores only the SHA-256 of the secret", () => {
    const { key, secretHash } = generateApiKey();
    const secret = key.split("-").at(-1) ?? "";
    expect(secretHash).toBe(createHash("sha256").update(secret).digest("hex"));
    expect(secretHash).not.toContain(secret);
  });

  it("makes a different key every time", () => {
    const keys = new Set(Array.from({ length: 200 }, () => generateApiKey().key));
    const publicIds = new Set([...keys].map((key) => parseApiKey(key)?.publicId));
    expect(keys.size).toBe(200);
    expect(publicIds.size).toBe(200);
  });

  it("parses back what it makes", () => {
    const { key, publicId } = generateApiKey();
    const parsed = parseApiKey(key);
    expect(parsed?.publicId).toBe(publicId);
    expect(parsed === undefined ? "" : formatApiKey(parsed)).toBe(key);
  });
});

describe("parseApiKey", () => {
  const secret = "A".repeat(32);

  it("splits a well-formed key", () => {
    expect(parseApiKey(`sk-tg-abcdef123456-${secret}`)).toEqual({ publicId: "abcdef123456", secret });
  });

  it.each([
    ["empty", ""],
    ["another prefix", `sk-xx-abcdef123456-${secret}`],
    ["an OpenAI key", `sk-proj-${secret}`],
    ["a short public id", `sk-tg-abcdef12345-${secret}`],
    ["an upper-case public id", `sk-tg-ABCDEF123456-${secret}`],
    ["a short secret", `sk-tg-abcdef123456-${"A".repeat(31)}`],
    ["a secret with symbols", `sk-tg-abcdef123456-${"A".repeat(31)}_`],
    ["a huge secret", `sk-tg-abcdef123456-${"A".repeat(129)}`],
    ["surrounding spaces", ` sk-tg-abcdef123456-${secret} `],
    ["a trailing newline", `sk-tg-abcdef123456-${secret}\n`],
    ["no secret", "sk-tg-abcdef123456-"],
  ])("answers undefined for %s", (_case, text) => {
    expect(parseApiKey(text)).toBeUndefined();
  });
});

describe("hashSecret and verifySecret", () => {
  it("hashes to lowercase hex SHA-256", () => {
    expect(hashSecret("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("accepts the right secret and refuses any other", () => {
    const hash = hashSecret("right-secret");
    expect(verifySecret("right-secret", hash)).toBe(true);
    expect(verifySecret("wrong-secret", hash)).toBe(false);
    expect(verifySecret("right-secret", Buffer.from(hash, "hex"))).toBe(true);
  });

  it("refuses a stored hash of the wrong length instead of throwing", () => {
    expect(verifySecret("secret", "abcd")).toBe(false);
  });
});

describe("isPublicId", () => {
  it("accepts 12 lowercase letters and digits only", () => {
    expect(isPublicId("abcdef123456")).toBe(true);
    expect(isPublicId("abcdef12345")).toBe(false);
    expect(isPublicId("ABCDEF123456")).toBe(false);
  });
});
