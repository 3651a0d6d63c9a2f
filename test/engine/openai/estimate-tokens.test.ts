import { describe, expect, it } from "vitest";
import {
  countPromptTokensAtMost,
  estimatePromptTokens,
} from "../../../src/engine/openai/estimate-prompt-tokens.ts";
import { estimateTextTokens } from "../../../src/engine/openai/estimate-tokens.ts";
import { createChatRequest } from "../../support/create-chat-request.ts";
import { createRandom } from "../../support/create-random.ts";

describe("estimateTextTokens", () => {
  // Counts from OpenAI's o200k tokenizer, for the calibration these samples pin.
  it.each([
    ["The quick brown fox jumps over the lazy dog.", 10],
    ["Tokenization splits text into smaller pieces called tokens.", 10],
    ['{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3}}', 21],
    ["const total = items.reduce((sum, item) => sum + item.price, 0);", 18],
    ["Москва — столица России.", 6],
    ["北京是中华人民共和国的首都。", 8],
    // Alphabets other than Latin: vocabularies hold fewer of their words (they used to count half).
    ["Η γρήγορη καφέ αλεπού πηδάει πάνω από τον τεμπέλη σκύλο.", 25],
    ["השועל החום המהיר קופץ מעל הכלב העצלן בגינה הגדולה.", 21],
    ["तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है।", 20],
  ])("estimates %j near its real count (%i)", (text, real) => {
    const estimate = estimateTextTokens(text);
    expect(estimate).toBeGreaterThanOrEqual(Math.floor(real * 0.75));
    expect(estimate).toBeLessThanOrEqual(Math.ceil(real * 1.4));
  });

  it("counts nothing for nothing, and grows with the text", () => {
    expect(estimateTextTokens("")).toBe(0);
    expect(estimateTextTokens("word ".repeat(1000))).toBeGreaterThan(900);
  });
});

describe("estimatePromptTokens", () => {
  const base = createChatRequest({
    messages: [
      { role: "system", content: "You are terse." },
      { role: "user", content: "Hello there" },
    ],
  });

  it("adds template tokens per message and for the reply", () => {
    // o200k with OpenAI's chat format counts 19 for this conversation.
    expect(estimatePromptTokens(base)).toBeGreaterThanOrEqual(15);
    expect(estimatePromptTokens(base)).toBeLessThanOrEqual(25);
  });

  it("counts tools, tool calls and a response schema", () => {
    const plain = estimatePromptTokens(base);
    const withTools = estimatePromptTokens({
      ...base,
      tools: [
        { name: "get_weather", parameters: { type: "object", properties: { city: { type: "string" } } } },
      ],
    });
    expect(withTools).toBeGreaterThan(plain + 10);
    const withCall = estimatePromptTokens({
      ...base,
      messages: [
        ...base.messages,
        {
          role: "assistant",
          content: null,
          toolCalls: [{ id: "c", name: "get_weather", arguments: '{"city":"Oslo"}' }],
        },
      ],
    });
    expect(withCall).toBeGreaterThan(plain + 8);
  });
});

describe("estimateTextTokens on ASCII", () => {
  it("counts ASCII text by character codes exactly as the general rules do", () => {
    // A space and a non-ASCII letter at the end send the text down the general path, adding one token.
    const samples = [
      "The quick brown fox jumps over the lazy dog.",
      '  indented\n\n\tcode();   // comment\r\n{ "a": [1, 22, 333, 4444] }',
      "internationalization counterrevolutionaries 1234567890 !!!???...",
      "\u0000control\u0007chars\u001f and ~`|\\ symbols",
    ];
    for (const sample of samples) {
      expect(estimateTextTokens(`${sample} é`)).toBe(estimateTextTokens(sample) + 1);
    }
  });
});

/**
 * The rules as regular expressions over the whole text, as the estimator applied them before it
 * read characters one at a time (the oracle its single pass must equal).
 */
function estimateByPattern(text: string): number {
  const pieces = /(\p{L}[\p{L}\p{M}]*)|(\p{N}+)|(\s+)|([^\p{L}\p{N}\s]+)/gu;
  const dense = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}\p{Script=Thai}]/u;
  const nonLatin = /[^\p{Script=Latin}\p{M}]/u;
  let tokens = 0;
  for (const [piece, letters, digits, space] of text.matchAll(pieces)) {
    if (letters !== undefined) {
      tokens += dense.test(letters)
        ? Math.ceil(letters.length / 1.5)
        : nonLatin.test(letters)
          ? Math.ceil(letters.length / 3)
          : 1 + Math.max(0, Math.ceil((letters.length - 6) / 6));
    } else if (digits !== undefined) tokens += Math.ceil(digits.length / 3);
    else if (space !== undefined) {
      const breaks = [...space].filter((character) => character === "\n").length;
      const spaces = space.length - breaks;
      tokens += Math.ceil(breaks / 2) + (spaces > 1 ? Math.ceil((spaces - 1) / 4) : 0);
    } else tokens += Math.ceil(piece.length / 3);
  }
  return tokens;
}

describe("estimateTextTokens, a character at a time", () => {
  it("counts as the rules' regular expressions do, on text of every kind", () => {
    // Latin with accents and combining marks, Cyrillic, Greek, Han, kana, Hangul, Thai (and its
    // marks), Devanagari, Arabic digits, non-ASCII spaces, emoji, a lone surrogate, controls.
    const alphabet = [
      ..."aZ09 \n\t\r.,;!?-_{}\"'\u0000\u007f",
      ..."éÅßñ\u0301\u0336ЖжΩω中文かなカナ한국ไทย\u0e31\u0e48हिंदी٣٤\u00a0\u2003\u3000€™⠿",
      "🦜",
      "🧿",
      "\ud800",
      "\udfff",
    ];
    const random = createRandom(7);
    for (let sample = 0; sample < 3000; sample++) {
      let text = "";
      const length = random(40);
      for (let index = 0; index < length; index++) text += alphabet[random(alphabet.length)];
      expect(estimateTextTokens(text), JSON.stringify(text)).toBe(estimateByPattern(text));
    }
  });

  it("counts a large text that holds one character beyond ASCII as the rules do", () => {
    const text = `é${"word ".repeat(200_000)}`;
    expect(estimateTextTokens(text)).toBe(estimateByPattern(text));
  });
});

describe("countPromptTokensAtMost", () => {
  // o200k counts of crafted texts, 4-11x their estimates: no byte-level tokenizer counts more
  // tokens than a text has UTF-8 bytes.
  it.each([
    ["combining marks", "a\u0336\u0337\u0338\u0339".repeat(500), 4500],
    ["box drawing and braille", "⠿⣿⡇⢸⣀⠛⢿⡿".repeat(400), 9200],
    ["emoji", "🦜🪬🧿🫠🪩🛞🫧🪸".repeat(300), 7200],
    ["letters in no language", "qzxjvkwfpgbmhdy".repeat(200), 2000],
  ])("bounds %s, which the estimate does not", (_name, text, real) => {
    const request = createChatRequest({ messages: [{ role: "user", content: text }] });
    expect(estimatePromptTokens(request)).toBeLessThan(real);
    expect(countPromptTokensAtMost(request)).toBeGreaterThanOrEqual(real);
  });

  it("counts every text sent upstream: tool call ids, a tool message's call id, the response format's name and description (regression: ids were not counted, and a prompt carried in them escaped the reservation)", () => {
    const filler = "x".repeat(1000);
    const plain = createChatRequest({
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: null, toolCalls: [{ id: "c", name: "f", arguments: "{}" }] },
        { role: "tool", content: "ok", toolCallId: "c" },
      ],
    });
    const withIds = createChatRequest({
      messages: [
        { role: "user", content: "Hi" },
        { role: "assistant", content: null, toolCalls: [{ id: filler, name: "f", arguments: "{}" }] },
        { role: "tool", content: "ok", toolCallId: filler },
      ],
    });
    expect(countPromptTokensAtMost(withIds)).toBeGreaterThanOrEqual(countPromptTokensAtMost(plain) + 1998);
    expect(estimatePromptTokens(withIds)).toBeGreaterThan(estimatePromptTokens(plain) + 200);

    const schema = { type: "object" };
    const formatted = (description: string | undefined) =>
      createChatRequest({
        messages: [{ role: "user", content: "Hi" }],
        responseFormat: {
          type: "json_schema",
          name: "answer",
          schema,
          ...(description === undefined ? {} : { description }),
        },
      });
    expect(countPromptTokensAtMost(formatted(filler))).toBeGreaterThanOrEqual(
      countPromptTokensAtMost(formatted(undefined)) + 1000,
    );
  });

  it("is never below the estimate", () => {
    const request = createChatRequest({ messages: [{ role: "user", content: "\n\n\n\n" }] });
    expect(countPromptTokensAtMost(request)).toBeGreaterThanOrEqual(estimatePromptTokens(request));
  });
});
