import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type ChatHistoryItem,
  getLlama,
  JinjaTemplateChatWrapper,
  type Llama,
  LlamaChat,
  type LlamaContext,
  type LlamaGrammar,
  LlamaLogLevel,
  type LlamaModel,
  QwenChatWrapper,
  resolveChatWrapper,
} from "node-llama-cpp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeTestModel } from "../../src/gguf/write-test-model.ts";

let folder: string;
let llama: Llama;
let model: LlamaModel;
let context: LlamaContext;
let chat: LlamaChat;

beforeAll(async () => {
  folder = await mkdtemp(join(tmpdir(), "tollgate-load-model-"));
  const { path } = await writeTestModel({ path: join(folder, "tiny.gguf") });
  llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
  model = await llama.loadModel({ modelPath: path });
  // The library default of 4 threads is hundreds of times slower on a 2-core machine.
  context = await model.createContext({ contextSize: 2048, threads: 1 });
  chat = new LlamaChat({ contextSequence: context.getSequence(), chatWrapper: resolveChatWrapper(model) });
});

afterAll(async () => {
  chat?.dispose();
  await context?.dispose();
  await model?.dispose();
  await llama?.dispose();
  await rm(folder, { recursive: true, force: true });
});

function ask(question: string): ChatHistoryItem[] {
  return [
    { type: "user", text: question },
    { type: "model", response: [] },
  ];
}

type Generation = { text: string; stopReason: string; tokens: number };

type GenerateOptions = { maxTokens: number; temperature: number; seed?: number; grammar?: LlamaGrammar };

async function generate(history: ChatHistoryItem[], options: GenerateOptions): Promise<Generation> {
  let tokens = 0;
  const result = await chat.generateResponse(history, {
    ...options,
    onToken: (chunk) => {
      tokens += chunk.length;
    },
  });
  return { text: result.response, stopReason: result.metadata.stopReason, tokens };
}

describe("the tiny test model in node-llama-cpp", () => {
  it("loads with its trained context and ChatML end-of-generation token", () => {
    expect(model.trainContextSize).toBe(2048);
    const imEnd = model.tokenize("<|im_end|>", true);
    expect(imEnd).toHaveLength(1);
    expect(model.tokens.eos).toBe(imEnd[0]);
    expect(model.isEogToken(imEnd[0]!)).toBe(true);
  });

  it("tokenizes special tokens as single tokens only when they are allowed", () => {
    const text = "<|im_start|>user\nHello<|im_end|>";
    const special = model.tokenize(text, true);
    const start = model.tokenize("<|im_start|>", true);
    expect(start).toHaveLength(1);
    expect(special[0]).toBe(start[0]);
    expect(special.at(-1)).toBe(model.tokenize("<|im_end|>", true)[0]);
    expect(model.tokenize(text, false).length).toBeGreaterThan(special.length + 4);
  });

  it("round-trips text through its byte-level BPE, merging common words", () => {
    const text = 'Hello world, how are you? {"name": "get_weather", "arguments": {"city": "Paris"}} héllo ✓';
    const tokens = model.tokenize(text);
    expect(model.detokenize(tokens)).toBe(text);
    expect(tokens.length).toBeLessThan(Buffer.byteLength(text) / 2);
  });

  it("resolves to the Jinja template wrapper with Qwen-style function calling", () => {
    const wrapper = resolveChatWrapper(model);
    expect(wrapper).toBeInstanceOf(JinjaTemplateChatWrapper);
    expect((wrapper as JinjaTemplateChatWrapper).usingJinjaFunctionCallTemplate).toBe(true);
    const state = wrapper.generateContextState({
      chatHistory: [
        { type: "system", text: "Be brief." },
        { type: "user", text: "Weather in Paris?" },
        {
          type: "model",
          response: [
            { type: "functionCall", name: "get_weather", params: { city: "Paris" }, result: { celsius: 21 } },
            "It is 21 degrees.",
          ],
        },
        { type: "user", text: "Thanks" },
        { type: "model", response: [] },
      ],
      availableFunctions: {
        get_weather: {
          description: "Current weather",
          params: { type: "object", properties: { city: { type: "string" } } },
        },
      },
    });
    const text = state.contextText.toString();
    expect(text).toMatch(/^<\|im_start\|>system\nBe brief\.\n\n# Tools\n/);
    expect(text).toContain('<tools>\n{"type": "function", "function": {"name": "get_weather"');
    expect(text).toContain(
      '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>',
    );
    expect(text).toContain('<|im_start|>user\n<tool_response>\n{"celsius": 21}\n</tool_response><|im_end|>');
    expect(text.endsWith("<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n")).toBe(true);
  });

  it("ends answers naturally on <|im_end|> at temperature 1", async () => {
    for (const seed of [1, 2, 3, 4, 5]) {
      const result = await generate(ask("Hello, what is the weather like today?"), {
        maxTokens: 200,
        temperature: 1,
        seed,
      });
      expect(result.stopReason, `seed ${seed}`).toBe("eogToken");
      expect(result.tokens).toBeGreaterThan(3);
    }
  });

  it("ends deterministically at temperature 0, also in a longer conversation", async () => {
    const history: ChatHistoryItem[] = [
      { type: "system", text: "You are a helpful assistant." },
      { type: "user", text: "Hi there" },
      { type: "model", response: ["Hello! How can I help you today?"] },
      ...ask("Write a haiku about the sea."),
    ];
    const first = await generate(history, { maxTokens: 200, temperature: 0 });
    const second = await generate(history, { maxTokens: 200, temperature: 0 });
    expect(first.stopReason).toBe("eogToken");
    expect(second).toEqual(first);
  });

  it("stops on the token limit when max tokens is small", async () => {
    const result = await generate(ask("Tell me a story."), { maxTokens: 3, temperature: 1, seed: 7 });
    expect(result.stopReason).toBe("maxTokens");
  });

  it("produces parseable JSON under the JSON grammar", async () => {
    const grammar = await llama.getGrammarFor("json");
    for (const seed of [1, 2, 3]) {
      const result = await generate(ask("Reply with JSON."), {
        maxTokens: 200,
        temperature: 1,
        seed,
        grammar,
      });
      expect(result.stopReason, result.text).not.toBe("maxTokens");
      expect(typeof JSON.parse(result.text), result.text).toBe("object");
    }
  });

  it("keeps ending answers with biasing at its default and never with endBias 0", async () => {
    const unbiased = await writeTestModel({ path: join(folder, "unbiased.gguf"), endBias: 0 });
    const unbiasedModel = await llama.loadModel({ modelPath: unbiased.path });
    const unbiasedContext = await unbiasedModel.createContext({ contextSize: 512, threads: 1 });
    const unbiasedChat = new LlamaChat({
      contextSequence: unbiasedContext.getSequence(),
      chatWrapper: resolveChatWrapper(unbiasedModel),
    });
    try {
      const result = await unbiasedChat.generateResponse(ask("Hello"), { maxTokens: 60, temperature: 0 });
      expect(result.metadata.stopReason).toBe("maxTokens");
      // At a temperature too: plain random logits used to sample the end now and then (seed 1234
      // at 0.7 ended after 5 tokens), cutting the generations that tests rely on running long.
      for (const [seed, temperature] of [
        [1234, 0.7],
        [1, 1],
        [2, 1.5],
      ] as const) {
        const sampled = await unbiasedChat.generateResponse(ask("Hello"), {
          maxTokens: 300,
          temperature,
          seed,
        });
        expect(sampled.metadata.stopReason, `seed ${seed} at ${temperature}`).toBe("maxTokens");
      }
    } finally {
      unbiasedChat.dispose();
      await unbiasedContext.dispose();
      await unbiasedModel.dispose();
    }
  });

  it("produces an object matching a JSON schema grammar", async () => {
    const grammar = await llama.createGrammarForJsonSchema({
      type: "object",
      properties: { a: { type: "string" } },
    });
    for (const temperature of [0, 1]) {
      const result = await generate(ask("Reply with JSON."), {
        maxTokens: 200,
        temperature,
        seed: 11,
        grammar,
      });
      expect(result.stopReason, result.text).not.toBe("maxTokens");
      expect(typeof grammar.parse(result.text).a).toBe("string");
    }
  });
});

describe("the qwen2 variant in node-llama-cpp", () => {
  it("resolves to QwenChatWrapper and ends an answer", async () => {
    const { path } = await writeTestModel({ path: join(folder, "qwen2.gguf"), architecture: "qwen2" });
    const qwen = await llama.loadModel({ modelPath: path });
    const qwenContext = await qwen.createContext({ contextSize: 512, threads: 1 });
    const wrapper = resolveChatWrapper(qwen);
    const qwenChat = new LlamaChat({ contextSequence: qwenContext.getSequence(), chatWrapper: wrapper });
    try {
      expect(wrapper).toBeInstanceOf(QwenChatWrapper);
      const result = await qwenChat.generateResponse(ask("Hello"), { maxTokens: 200, temperature: 0 });
      expect(result.metadata.stopReason).toBe("eogToken");
    } finally {
      qwenChat.dispose();
      await qwenContext.dispose();
      await qwen.dispose();
    }
  });
});

describe("the small test model in node-llama-cpp", () => {
  it("loads its Q8_0 weights and ends an answer", async () => {
    const { path } = await writeTestModel({ path: join(folder, "small.gguf"), size: "small", seed: 3 });
    const small = await llama.loadModel({ modelPath: path });
    const smallContext = await small.createContext({ contextSize: 1024, threads: 1 });
    const smallChat = new LlamaChat({
      contextSequence: smallContext.getSequence(),
      chatWrapper: resolveChatWrapper(small),
    });
    try {
      expect(small.trainContextSize).toBe(4096);
      const result = await smallChat.generateResponse(ask("Hello"), {
        maxTokens: 200,
        temperature: 1,
        seed: 1,
      });
      expect(result.metadata.stopReason).toBe("eogToken");
    } finally {
      smallChat.dispose();
      await smallContext.dispose();
      await small.dispose();
    }
  });
});
