import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import {
  costOfUsage,
  formatAmount,
  MAX_AMOUNT_NANO,
  MoneyFormatError,
  type MoneyFormatReason,
  NANO_PER_UNIT,
  parseAmount,
} from "../../src/billing/money.ts";
import { createSeededRandom, type SeededRandom } from "./seeded-random.ts";

const RUNS = 5_000;

/** A random amount whose size varies from a few nano-units to the maximum. */
function randomAmount(random: SeededRandom): bigint {
  const digitCount = random.integer(1, 19);
  return random.below(10n ** BigInt(digitCount)) % (MAX_AMOUNT_NANO + 1n);
}

/** A random decimal text below the maximum: 1 to 9 whole digits (no leading zero unless "0"), 0 to 9 decimals. */
function randomDecimalText(random: SeededRandom): string {
  const wholeLength = random.integer(1, 9);
  const whole =
    wholeLength === 1 ? random.digits(1) : `${random.integer(1, 9)}${random.digits(wholeLength - 1)}`;
  const decimals = random.integer(0, 9);
  return decimals === 0 ? whole : `${whole}.${random.digits(decimals)}`;
}

/** The canonical form of a decimal text, computed on the text alone. */
function canonicalText(text: string): string {
  const [whole = "", fraction = ""] = text.split(".");
  const trimmed = fraction.replace(/0+$/, "");
  return trimmed === "" ? whole : `${whole}.${trimmed}`;
}

function expectMoneyError(input: unknown, reason: MoneyFormatReason, messagePart: string): void {
  try {
    parseAmount(input as string);
  } catch (error) {
    expect(error).toBeInstanceOf(MoneyFormatError);
    expect(error).toBeInstanceOf(Error);
    expect((error as MoneyFormatError).reason).toBe(reason);
    expect((error as MoneyFormatError).message).toContain(messagePart);
    return;
  }
  throw new Error(`parseAmount(${JSON.stringify(input)}) did not throw`);
}

describe("parseAmount", () => {
  it.each([
    ["0", 0n],
    ["12", 12n * NANO_PER_UNIT],
    ["0.10", 100_000_000n],
    ["0.1", 100_000_000n],
    ["1.000000001", 1_000_000_001n],
    ["0.000000001", 1n],
    ["007.5", 7_500_000_000n],
    ["9223372036.854775807", MAX_AMOUNT_NANO],
    // Zeros past the ninth decimal place change nothing, as decimal libraries write them.
    ["1.0000000000", NANO_PER_UNIT],
    ["0.1500000000000", 150_000_000n],
    [`${"0".repeat(40)}2.5`, 2_500_000_000n],
  ])("reads %j as %d nano-units", (text, nano) => {
    expect(parseAmount(text)).toBe(nano);
  });

  it("adds exactly where floating point does not (0.1 + 0.2 = 0.3)", () => {
    expect(parseAmount("0.1") + parseAmount("0.2")).toBe(parseAmount("0.3"));
  });

  it("keeps amounts above 2^53 nano-units exact", () => {
    expect(parseAmount("9007199.254740993")).toBe(9_007_199_254_740_993n);
    expect(formatAmount(9_007_199_254_740_993n)).toBe("9007199.254740993");
  });

  it.each<[unknown, MoneyFormatReason, string]>([
    [0.1, "not_a_string", "quote it"],
    [12, "not_a_string", "the number 12"],
    [null, "not_a_string", "decimal strings"],
    ["", "empty", "empty"],
    [" 1", "whitespace", "spaces"],
    ["1 ", "whitespace", "spaces"],
    ["1\t", "whitespace", "spaces"],
    ["-1", "negative", "negative"],
    ["-0.5", "negative", "negative"],
    // Zero with a sign is not negative (regression: "is negative; amounts are zero or more").
    ["-0", "negative", '"-0" has a minus sign; amounts are zero or more, written without a sign'],
    ["-0.00", "negative", "has a minus sign"],
    ["1e3", "exponent", "exponent"],
    ["1.5E-7", "exponent", "exponent"],
    [".5e2", "exponent", "exponent"],
    ["0.0000000001", "too_many_decimals", "more than 9 decimal places"],
    ["9223372036.854775808", "too_large", "too large"],
    ["100000000000000000000", "too_large", "too large"],
    ["0.0000000001000", "too_many_decimals", "more than 9 decimal places"],
    ["0.1.2", "not_decimal", "is not a decimal amount"],
    [".5", "not_decimal", "is not a decimal amount"],
    ["5.", "not_decimal", "is not a decimal amount"],
    ["+1", "not_decimal", "is not a decimal amount"],
    ["abc", "not_decimal", "is not a decimal amount"],
    ["1,5", "not_decimal", "is not a decimal amount"],
    ["NaN", "not_decimal", "is not a decimal amount"],
    ["Infinity", "not_decimal", "is not a decimal amount"],
    ["0x10", "not_decimal", "is not a decimal amount"],
    ["١٢", "not_decimal", "is not a decimal amount"],
  ])("refuses %j (%s)", (input, reason, messagePart) => {
    expectMoneyError(input, reason, messagePart);
  });

  it("refuses millions of digits at once, showing only their start", () => {
    expectMoneyError("9".repeat(4_000_000), "too_large", `"${"9".repeat(32)}..." is too large`);
    expectMoneyError(`1.${"5".repeat(100)}`, "too_many_decimals", `"1.${"5".repeat(30)}..." has more`);
    // A long run of zeros before a last digit: the zeros at the end are looked at once.
    expectMoneyError(`1.${"0".repeat(2_000_000)}1`, "too_many_decimals", "has more than 9 decimal places");
    expect(parseAmount(`2.5${"0".repeat(2_000_000)}`)).toBe(2_500_000_000n);
  });

  // Regression: the start was cut at 32 code units, which could split an emoji and show "\ud83d".
  it("shows the start of a long text without cutting an emoji in half", () => {
    expectMoneyError(
      `${"1".repeat(31)}😀${"2".repeat(40)}`,
      "not_decimal",
      `"${"1".repeat(31)}..." is not a decimal`,
    );
  });

  it("names what the amount is in its messages", () => {
    expect(() => parseAmount("0.1.2", { noun: "price" })).toThrow(
      '"0.1.2" is not a decimal amount; write a price such as "0.15"',
    );
    expect(() => parseAmount("x")).toThrow('write an amount such as "0.15"');
  });

  it("reads every canonical decimal back to the same text (property, seeded)", () => {
    const random = createSeededRandom(20_240_919n);
    for (let run = 0; run < RUNS; run++) {
      const text = randomDecimalText(random);
      expect(formatAmount(parseAmount(text))).toBe(canonicalText(text));
    }
  });

  it("agrees with a digit-by-digit reading (property, seeded)", () => {
    const random = createSeededRandom(7n);
    for (let run = 0; run < RUNS; run++) {
      const text = randomDecimalText(random);
      const [whole = "", fraction = ""] = text.split(".");
      expect(parseAmount(text)).toBe(BigInt(whole + fraction.padEnd(9, "0")));
    }
  });
});

describe("formatAmount", () => {
  it.each([
    [0n, "0"],
    [1n, "0.000000001"],
    [100_000_000n, "0.1"],
    [12n * NANO_PER_UNIT, "12"],
    [12_000_000_001n, "12.000000001"],
    [-3_500_000_000n, "-3.5"],
    [-1n, "-0.000000001"],
    [MAX_AMOUNT_NANO, "9223372036.854775807"],
  ])("writes %d as %j", (nano, text) => {
    expect(formatAmount(nano)).toBe(text);
  });

  it("round-trips every amount through parseAmount (property, seeded)", () => {
    const random = createSeededRandom(42n);
    for (let run = 0; run < RUNS; run++) {
      const nano = randomAmount(random);
      const text = formatAmount(nano);
      expect(text).toMatch(/^(0|[1-9][0-9]*)(\.[0-9]*[1-9])?$/);
      expect(parseAmount(text)).toBe(nano);
    }
  });

  it("writes negatives as the positive amount with a leading minus (property, seeded)", () => {
    const random = createSeededRandom(1n);
    for (let run = 0; run < RUNS; run++) {
      const nano = randomAmount(random) + 1n;
      expect(formatAmount(-nano)).toBe(`-${formatAmount(nano)}`);
    }
  });
});

describe("costOfUsage", () => {
  const price = (text: string): bigint => parseAmount(text);

  it("charges the exact cost when it is a whole number of nano-units", () => {
    // 1,000 prompt tokens at 0.10 and 500 completion tokens at 0.40 per million.
    const cost = costOfUsage({
      promptTokens: 1000,
      completionTokens: 500,
      inputPerMillionNano: price("0.10"),
      outputPerMillionNano: price("0.40"),
    });
    expect(formatAmount(cost)).toBe("0.0003");
  });

  it("rounds up once per request, not per token kind", () => {
    // 1 × 1 nano + 1 × 1 nano = 2 nano per million tokens → 0.000002 nano → 1 nano.
    expect(
      costOfUsage({
        promptTokens: 1,
        completionTokens: 1,
        inputPerMillionNano: 1n,
        outputPerMillionNano: 1n,
      }),
    ).toBe(1n);
    // 500,000 × 1 + 500,000 × 1 = exactly 1 nano: no extra unit.
    expect(
      costOfUsage({
        promptTokens: 500_000,
        completionTokens: 500_000,
        inputPerMillionNano: 1n,
        outputPerMillionNano: 1n,
      }),
    ).toBe(1n);
  });

  it("costs nothing when no completion token was produced", () => {
    expect(
      costOfUsage({
        promptTokens: 123_456,
        completionTokens: 0,
        inputPerMillionNano: price("5"),
        outputPerMillionNano: price("15"),
      }),
    ).toBe(0n);
  });

  it("costs nothing with free prices", () => {
    expect(
      costOfUsage({
        promptTokens: 10,
        completionTokens: 10,
        inputPerMillionNano: 0n,
        outputPerMillionNano: 0n,
      }),
    ).toBe(0n);
  });

  it.each([
    { promptTokens: -1, completionTokens: 1 },
    { promptTokens: 1.5, completionTokens: 1 },
    { promptTokens: 1, completionTokens: Number.NaN },
    { promptTokens: 1, completionTokens: 2 ** 53 },
  ])("refuses token counts that are not non-negative integers: %o", (tokens) => {
    expect(() => costOfUsage({ ...tokens, inputPerMillionNano: 1n, outputPerMillionNano: 1n })).toThrow(
      RangeError,
    );
  });

  it("refuses negative prices", () => {
    expect(() =>
      costOfUsage({
        promptTokens: 1,
        completionTokens: 1,
        inputPerMillionNano: -1n,
        outputPerMillionNano: 1n,
      }),
    ).toThrow(RangeError);
  });

  it("is the smallest whole nano-unit not below the exact cost (property, seeded)", () => {
    const random = createSeededRandom(99n);
    for (let run = 0; run < RUNS; run++) {
      const promptTokens = random.integer(0, 2_000_000);
      const completionTokens = random.integer(1, 200_000);
      const inputPerMillionNano = randomAmount(random) % 1_000_000_000_000n;
      const outputPerMillionNano = randomAmount(random) % 1_000_000_000_000n;
      const cost = costOfUsage({ promptTokens, completionTokens, inputPerMillionNano, outputPerMillionNano });
      // The exact cost times one million, as an integer.
      const exactTimesMillion =
        BigInt(promptTokens) * inputPerMillionNano + BigInt(completionTokens) * outputPerMillionNano;
      expect(typeof cost).toBe("bigint");
      expect(cost * 1_000_000n >= exactTimesMillion).toBe(true);
      expect((cost - 1n) * 1_000_000n < exactTimesMillion).toBe(true);
    }
  });

  it("never charges less for more tokens (property, seeded)", () => {
    const random = createSeededRandom(3n);
    for (let run = 0; run < RUNS; run++) {
      const prices = {
        inputPerMillionNano: randomAmount(random),
        outputPerMillionNano: randomAmount(random),
      };
      const promptTokens = random.integer(0, 100_000);
      const completionTokens = random.integer(1, 100_000);
      const base = costOfUsage({ promptTokens, completionTokens, ...prices });
      expect(costOfUsage({ promptTokens: promptTokens + 1, completionTokens, ...prices }) >= base).toBe(true);
      expect(costOfUsage({ promptTokens, completionTokens: completionTokens + 1, ...prices }) >= base).toBe(
        true,
      );
    }
  });
});

describe("money.ts", () => {
  it("uses no floating-point arithmetic", async () => {
    const source = await readFile(new URL("../../src/billing/money.ts", import.meta.url), "utf8");
    expect(source).not.toMatch(/parseFloat|parseInt|Math\.|toFixed|toPrecision|Number\(/);
  });
});
